"""Volcano's `numa-aware` scheduler plugin (ENGINE.md §3), reproduced decision for decision.

Modelled exactly: the QoS gate, `filterNodeByPolicy` with upstream's reason strings, the
per-container simulation with the *node's* topology policy and Volcano's legacy hint merge, the CPU
hint provider (hints from total capacity and free counts, reserved CPUs re-derived from a quantity),
Volcano's own CPU selection for the reserved and predicted CPUs (`cpumanager/cpu_assignment`, §3.5), the
NUMA-span batch score with weight and normalisation, the session events that keep an in-session
free-CPU view and the close hand-off to the cache (`cache`).

Node input is Volcano's view of a node, `NumaModel` (the Numatopology CRD: raw policy strings,
per-CPU detail, reserved quantity) plus a free-CPU mask per node (`None` = the CRD has no `cpu`
entry in `numares`). `NumaModel.from_node(node)` derives it from an engine `Node`.

Hot paths work on int masks and per-NUMA counts; hint lists are cached per (free counts, request).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypedDict

from ..errors import EngineError
from ..model.bitmask import bits_of as _bits
from ..model.cpuset import CPUSet
from ..model.pods import GUARANTEED, Pod
from .cpumanager.cpu_assignment import Selection
from .cpumanager.cpu_assignment import take_by_topology as volcano_take
from .cpumanager.provider import NumaModel
from .policy import Hint, HintDict, guaranteed_cpus, has_policy, policy_predicate

#: Volcano framework status codes used by the predicate.
ERROR = "Error"
UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
#: Predicate outcomes (same names as the conformance vectors).
PASS_NOT_GUARANTEED = "pass_not_guaranteed"
PASS_SKIPPED = "pass_skipped"
PASS_ASSIGNED = "pass_assigned"
REJECT = "reject"

#: Exact upstream reason strings of filterNodeByPolicy (ENGINE.md §3.3).
REASON_NUMA_INFO_EMPTY = "numa info is empty"
REASON_CPU_NOT_STATIC = "cpu manager policy isn't static"
REASON_ALLOCATABLE_EMPTY = "cpu allocatable map is empty"



def reason_policy_mismatch(task_policy: str, node_policy: str) -> str:
    return f"task topology policy[{task_policy}] is different with node[{node_policy}]"


def reason_container(name: str) -> str:
    return f"container {name} cannot be assigned by numa"


class ContainerDict(TypedDict):
    container: str
    hints: dict[str, list[HintDict] | None]
    best_hint: HintDict | None
    admit: bool
    cpus: str
    order_dependent: bool


class PodMetaDict(TypedDict):
    uid: str
    name: str
    namespace: str


class CloseEntry(TypedDict):
    """One task of the plugin's session-close hand-off to the cache: the node it went to and its CPU mask."""

    task_uid: str
    pod_meta: PodMetaDict
    node: str
    cpus: int


#: the CPU provider's hint list is cached per (free CPUs per NUMA node, whole CPUs requested)
HintsKey = tuple[tuple[int, ...], int]


# ------------------------------------------------------------------------------------------------
# Task side
# ------------------------------------------------------------------------------------------------


class VolcanoTask(NamedTuple):
    """What the plugin reads from a pod: identity, the policy annotation (raw string, "" when absent),
    the QoS class and the regular containers as (name, cpu request in millicores or None)."""

    uid: str
    name: str
    namespace: str
    policy: str
    qos: str
    containers: tuple[tuple[str, int | None], ...]

    @classmethod
    def from_pod(cls, pod: Pod) -> VolcanoTask:
        """Init containers are ignored (ENGINE.md §3.2); a container without a cpu request has None."""
        containers = tuple((c.name, c.requests.get("cpu")) for c in pod.containers)
        return cls(pod.uid, pod.name, pod.namespace, pod.topology_policy or "", pod.qos_class, containers)

    def signature(self) -> tuple[str, str, tuple[tuple[str, int | None], ...]]:
        """Everything the predicate depends on (not the pod's identity): for verdict caching."""
        return (self.policy, self.qos, self.containers)


@dataclass
class ContainerDecision:
    """One container's simulation on one node: the provider's hints (None = no map), the merged best
    hint, admit, and the CPUs the plugin would assign."""

    name: str
    hints_key: HintsKey | None  # None when the provider gave no map
    best: Hint | None
    admit: bool
    cpus: int = 0
    model: NumaModel | None = None
    #: upstream could have picked other CPUs here (Go map order in Volcano's selection)
    order_dependent: bool = False

    @property
    def hints(self) -> list[Hint] | None:
        """The provider's hint list, generated on demand (explanations) from the cached counts."""
        if self.hints_key is None or self.model is None:
            return None
        return self.model.hints_for(*self.hints_key)

    def to_dict(self) -> ContainerDict:
        return {
            "container": self.name,
            "hints": {"cpu": None if self.hints is None else [h.to_dict() for h in self.hints]},
            "best_hint": None if self.best is None else self.best.to_dict(),
            "admit": self.admit,
            "cpus": str(CPUSet(self.cpus)),
            "order_dependent": self.order_dependent,
        }


@dataclass
class Verdict:
    """The predicate's answer for one task on one node (state): outcome, code and reason when
    rejected, per-container decisions and the recorded assignment (cpu mask, None = none recorded)."""

    outcome: str
    code: str | None = None
    reason: str | None = None
    containers: list[ContainerDecision] = field(default_factory=list)
    assignment: int | None = None
    numa_count: int = 0
    numa_mask: int = 0

    @property
    def passed(self) -> bool:
        return self.outcome != REJECT

    @property
    def order_dependent(self) -> bool:
        """Some container's predicted CPUs depend on Go's map order upstream."""
        return any(c.order_dependent for c in self.containers)

    def best_hints(self) -> list[Hint]:
        """Best hints of the admitted containers, in container order (as the vectors list them)."""
        return [c.best for c in self.containers if c.admit and c.best is not None]


def filter_node_by_policy(task_policy: str, model: NumaModel | None, free: int | None) -> tuple[bool, str | None]:
    """ENGINE.md §3.3: (fit, error reason). (False, None) = the plugin skips this node (it passes)."""
    if has_policy(task_policy):
        if model is None:
            return False, REASON_NUMA_INFO_EMPTY
        if model.cpu_policy != "static":
            return False, REASON_CPU_NOT_STATIC
        if task_policy != model.tm_policy:
            return False, reason_policy_mismatch(task_policy, model.tm_policy)
        if not free:
            return False, REASON_ALLOCATABLE_EMPTY
        return True, None
    if model is None or model.cpu_policy != "static" or model.tm_policy in ("none", ""):
        return False, None
    return True, None


def allocate_container(model: NumaModel, best: Hint, avail: int, req: int) -> Selection:
    """ENGINE.md §3.4 Allocate: Volcano's selection from the best hint's NUMA nodes first, then the rest
    from everything available; empty on failure. The CPUs can outnumber `req` (per-socket core ids)."""
    result = Selection(0)
    if best.affinity is not None:
        aligned_pool = 0
        for n in _bits(best.affinity):
            aligned_pool |= model.numa_cpus.get(n, 0)
        aligned = avail & aligned_pool
        try:
            result = volcano_take(model.cpu_topology, aligned, min(req, aligned.bit_count()))
        except EngineError:
            return Selection(0)
    try:
        rest = volcano_take(model.cpu_topology, avail & ~result.cpus, req - result.cpus.bit_count())
    except EngineError:
        return Selection(0)
    return Selection(result.cpus | rest.cpus, result.order_dependent or rest.order_dependent)


def predicate(task: VolcanoTask, model: NumaModel | None, free: int | None) -> Verdict:
    """The plugin's predicate for one task on one node whose in-session free CPUs are `free`
    (None = no `cpu` entry). Pure: the caller records the assignment (ENGINE.md §3.3)."""
    if task.qos != GUARANTEED:
        return Verdict(PASS_NOT_GUARANTEED)
    fit, err = filter_node_by_policy(task.policy, model, free)
    if not fit:
        if err is not None:
            return Verdict(REJECT, ERROR, err)
        return Verdict(PASS_SKIPPED)
    if model is None:  # unreachable: filter_node_by_policy only fits nodes that have a model
        return Verdict(PASS_SKIPPED)
    policy = model.tm_policy
    cur = free
    total = 0
    decisions: list[ContainerDecision] = []
    for name, milli in task.containers:
        req = guaranteed_cpus(milli)
        if milli is None or req == 0 or cur is None:
            key: HintsKey | None = None
            avail = 0 if cur is None else cur & ~model.reserved
            best, admit = policy_predicate(policy, model.numa_ids, [None])  # CPU provider: no map
        else:
            avail = cur & ~model.reserved
            key = (model.free_counts(avail), req)
            best, admit = model.best_hint(key[0], req, policy)
        if not admit:
            decisions.append(ContainerDecision(name, key, best, False, 0, model))
            return Verdict(REJECT, UNSCHEDULABLE_AND_UNRESOLVABLE, reason_container(name), decisions)
        got = allocate_container(model, best, avail, req) if req else Selection(0)
        decisions.append(ContainerDecision(name, key, best, True, got.cpus, model, got.order_dependent))
        total |= got.cpus
        if cur is not None:
            cur &= ~got.cpus
    return Verdict(PASS_ASSIGNED, containers=decisions, assignment=total,
                   numa_count=model.numa_count(total), numa_mask=model.numa_mask(total))


def normalize_scores(counts: Sequence[int], weight: int = 1) -> list[int]:
    """ENGINE.md §3.6: `100 − floor(100·count/max)` (all 100 when max is 0), times the weight."""
    top = max(counts, default=0)
    if top == 0:
        return [100 * weight for _ in counts]
    return [(100 - (100 * c) // top) * weight for c in counts]


def plugin_weight(arguments: Mapping[str, object] | None) -> int:
    """The plugin's `weight` argument: used only when it is an integer (floats, strings → 1) (ENGINE.md §3.6)."""
    value = (arguments or {}).get("weight", 1)
    if isinstance(value, bool) or not isinstance(value, int):
        return 1
    return value


# ------------------------------------------------------------------------------------------------
# Session state (ENGINE.md §3.7)
# ------------------------------------------------------------------------------------------------


class VolcanoPlugin:
    """One session's plugin instance (ENGINE.md §3.7): Volcano's view of each node (`NumaModel`, None without a
    Numatopology), the in-session free CPUs per node, simulated assignments per (task, node), and the
    tasks bound through allocate events. The `volcano` profile drives it; so do the vectors."""

    def __init__(self, nodes: Mapping[str, tuple[NumaModel | None, int | None]], weight: int = 1) -> None:
        self.models: dict[str, NumaModel | None] = {n: m for n, (m, _f) in nodes.items()}
        self.free: dict[str, int | None] = {n: (f if m is not None else None) for n, (m, f) in nodes.items()}
        self.weight = weight
        self.assign_res: dict[str, dict[str, int]] = {}
        self.task_bind_node: dict[str, str] = {}
        self.task_pod_meta: dict[str, PodMetaDict] = {}
        self._tasks: dict[str, VolcanoTask] = {}

    def simulate(self, task: VolcanoTask, node: str) -> Verdict:
        """The predicate's verdict on the node's current in-session state, recording nothing."""
        return predicate(task, self.models.get(node), self.free.get(node))

    def record(self, task: VolcanoTask, node: str, cpus: int) -> None:
        """What predicateFn stores after a pass: the task's simulated CPUs on that node."""
        self._tasks[task.uid] = task
        self.assign_res.setdefault(task.uid, {})[node] = cpus

    def predicate(self, task: VolcanoTask, node: str) -> Verdict:
        """predicateFn (ENGINE.md §3.3): simulate, and record the assignment when the task passed with one."""
        verdict = self.simulate(task, node)
        if verdict.outcome == PASS_ASSIGNED:
            self.record(task, node, verdict.assignment or 0)
        return verdict

    def scores(self, task: VolcanoTask, numa_counts: Sequence[int]) -> list[int] | None:
        """ENGINE.md §3.6 for a task that has assignments: None without a task policy, else the
        normalised NUMA-span scores times the weight."""
        if not has_policy(task.policy):
            return None
        return normalize_scores(numa_counts, self.weight)

    def batch_score(self, task: VolcanoTask, nodes: Sequence[str]) -> dict[str, int] | None:
        """ENGINE.md §3.6: None when the task has no assignment this session or has no policy."""
        if task.uid not in self.assign_res:
            return None
        scores = self.scores(task, list(self.numa_counts(task, nodes).values()))
        return None if scores is None else dict(zip(nodes, scores, strict=True))

    def numa_counts(self, task: VolcanoTask, nodes: Sequence[str]) -> dict[str, int]:
        assigned = self.assign_res.get(task.uid, {})
        out: dict[str, int] = {}
        for n in nodes:
            model = self.models.get(n)
            out[n] = model.numa_count(assigned.get(n, 0)) if model is not None else 0
        return out

    def allocate(self, task_uid: str, node: str) -> bool:
        """AllocateFunc: apply the recorded assignment to the node's free view; False when none."""
        cpus = self.assign_res.get(task_uid, {}).get(node)
        if cpus is None:
            return False
        free = self.free.get(node)
        if free is not None:
            self.free[node] = free & ~cpus
        self.task_bind_node[task_uid] = node
        task = self._tasks.get(task_uid)
        if task is not None:
            self.task_pod_meta[task_uid] = {"uid": task.uid, "name": task.name, "namespace": task.namespace}
        return True

    def deallocate(self, task_uid: str, node: str) -> bool:
        """DeallocateFunc: give the recorded assignment back; False when none."""
        cpus = self.assign_res.get(task_uid, {}).get(node)
        if cpus is None:
            return False
        free = self.free.get(node)
        if free is not None:
            self.free[node] = free | cpus
        self.task_bind_node.pop(task_uid, None)
        self.task_pod_meta.pop(task_uid, None)
        return True

    def close(self) -> list[CloseEntry]:
        """OnSessionClose: the (task → node → cpus) hand-off to the cache, sorted by task uid."""
        out: list[CloseEntry] = []
        for uid in sorted(self.task_bind_node):
            node = self.task_bind_node[uid]
            cpus = self.assign_res.get(uid, {}).get(node)
            meta = self.task_pod_meta.get(uid)
            if cpus is None or meta is None:
                continue
            out.append({"task_uid": uid, "pod_meta": meta.copy(), "node": node, "cpus": cpus})
        return out
