"""Jobs as submitted: a Volcano-style job of tasks, each task a pod template with replicas, a
topology policy and a gang minimum (`min_available`). Validated on construction."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import PolicyError, RequestError, check_int
from .kubelet import TOPOLOGY_POLICIES
from .pods import Pod


@dataclass(frozen=True)
class Task:
    """A task of a job: `replicas` pods made from `template`. `topology_policy` (Volcano's
    `topologyPolicy`) overrides the template's `volcano.sh/numa-topology-policy` annotation."""

    name: str
    template: Pod
    replicas: int = 1
    topology_policy: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise RequestError("every task needs a non-empty name", "task")
        check_int(self.replicas, f"task {self.name}: replicas", field="replicas")
        if self.topology_policy is not None and self.topology_policy not in TOPOLOGY_POLICIES:
            raise PolicyError(f"task {self.name}: unknown topology policy {self.topology_policy!r}; "
                              f"expected one of: {', '.join(TOPOLOGY_POLICIES)}", "topology_policy")

    @property
    def policy(self) -> str | None:
        """The policy its pods carry: the task's, else the template's annotation."""
        return self.topology_policy or self.template.topology_policy


@dataclass(frozen=True)
class Job:
    """A gang of tasks. `min_available` defaults to every replica; jobs run in priority order
    (higher first), then in `submitted` order."""

    name: str
    tasks: tuple[Task, ...]
    min_available: int | None = None
    priority: int = 0
    queue: str = "default"
    namespace: str = "default"
    submitted: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise RequestError("a job needs a non-empty name", "name")
        object.__setattr__(self, "tasks", tuple(self.tasks))
        if not self.tasks:
            raise RequestError(f"job {self.name}: needs at least one task")
        names = [t.name for t in self.tasks]
        for name in names:
            if names.count(name) > 1:
                raise RequestError(f"job {self.name}: task name {name!r} is used twice", "task")
        total = sum(t.replicas for t in self.tasks)
        if self.min_available is None:
            object.__setattr__(self, "min_available", total)
        check_int(self.min_available, f"job {self.name}: minAvailable", field="min_available")
        if self.min_available > total:
            raise RequestError(
                f"job {self.name}: minAvailable ({self.min_available}) is more than its {total} replicas",
                "min_available")
        check_int(self.priority, f"job {self.name}: priority", None, field="priority")

    def pods(self) -> list[tuple[Task, Pod]]:
        """Every replica as a concrete pod `<job>-<task>-<i>` carrying the task's policy."""
        out = []
        for task in self.tasks:
            for i in range(task.replicas):
                pod = replace(task.template, name=f"{self.name}-{task.name}-{i}", namespace=self.namespace,
                              uid=f"{self.namespace}/{self.name}-{task.name}-{i}",
                              topology_policy=task.policy)
                out.append((task, pod))
        return out
