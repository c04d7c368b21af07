"""Jobs as submitted: a Volcano-style job of tasks, each task a pod template with replicas, a
topology policy and a gang minimum (`min_available`). Validated on construction."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import PolicyError, RequestError, check_int
from .kubelet_config import TOPOLOGY_POLICIES
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
        minimum = total if self.min_available is None else self.min_available
        object.__setattr__(self, "min_available", minimum)
        check_int(minimum, f"job {self.name}: minAvailable", field="min_available")
        if minimum > total:
            raise RequestError(
                f"job {self.name}: minAvailable ({minimum}) is more than its {total} replicas",
                "min_available")
        check_int(self.priority, f"job {self.name}: priority", None, field="priority")

    def pod(self, task: Task, index: int) -> Pod:
        """Replica `index` of `task` as a concrete pod `<job>-<task>-<index>` carrying the task's policy."""
        name = f"{self.name}-{task.name}-{index}"
        return replace(task.template, name=name, namespace=self.namespace, uid=f"{self.namespace}/{name}",
                       topology_policy=task.policy)

    def first_pod(self) -> Pod | None:
        """The first replica of the first task that has one (None: no replicas), without building the rest."""
        return next((self.pod(t, 0) for t in self.tasks if t.replicas), None)

    def pods(self) -> list[tuple[Task, Pod]]:
        """Every replica as a concrete pod (see `pod`), tasks in order, replicas in index order."""
        return [(task, self.pod(task, i)) for task in self.tasks for i in range(task.replicas)]
