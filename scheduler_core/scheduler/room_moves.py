"""Moves, for making room (MAKE_ROOM.md): the pods running on a cluster as the kubelet holds them,
which of them may move, a plan carried out on a copy of the cluster and checked by a real session, and
`RoomPlan`, the answer `room.make_room` gives.

A plan is carried out the way an operator would: every moved or evicted pod is taken off its node,
the target's session runs (it must place its gang's `min_available` with no admission error), then
each moved pod is re-admitted, in the plan's order, on its destination node — a real kubelet
admission there, so it gets the CPUs that node's policies give it. A plan is *valid* when all of
that succeeds and every node a pod was taken off receives a pod of the target (a move frees room
the target takes, or it is not worth making).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NotRequired, TypedDict

from ..errors import RequestError
from ..kubelet.admission import admit_pod
from ..model.cpuset import CPUSet
from ..model.jobs import Job, Task
from ..model.node import Allocation
from ..model.pods import GUARANTEED, Container, Pod
from .cluster import Cluster, Request
from .explain import PodStatus, SessionResult
from .profiles import Profile
from .session import run_session

DEFAULT_PROTECTED = ("kube-system",)


@dataclass(frozen=True)
class RunningPod:
    """A pod holding resources on a node: its allocations (one per container, or one for the pod)
    and its priority (0 when unknown)."""

    uid: str
    node: str
    allocations: tuple[Allocation, ...]
    priority: int = 0

    @property
    def namespace(self) -> str:
        return self.uid.partition("/")[0] if "/" in self.uid else "default"

    @property
    def name(self) -> str:
        return self.uid.partition("/")[2] if "/" in self.uid else self.uid

    @cached_property
    def cpus(self) -> CPUSet:
        """Computed once per pod: the search sorts and sums thousands of pods by their CPUs, over and over."""
        mask = 0
        for a in self.allocations:
            mask |= a.cpus.mask
        return CPUSet(mask)

    @cached_property
    def cpu_count(self) -> int:
        return len(self.cpus)

    def pod(self) -> Pod:
        """The pod as the kubelet would admit it again: per allocation a Guaranteed container asking
        for exactly what it holds (CPUs, memory and hugepages summed over NUMA nodes, device counts)."""
        containers = []
        for i, a in enumerate(self.allocations):
            res: dict[str, int] = {}
            if a.cpus:
                res["cpu"] = len(a.cpus) * 1000
            for amounts in a.memory.values():
                for r, b in amounts.items():
                    res[r] = res.get(r, 0) + b
            for r, ids in a.devices.items():
                res[r] = len(ids)
            containers.append(Container(a.container or f"container-{i}", res, dict(res)))
        return Pod(self.name, tuple(containers), namespace=self.namespace, uid=self.uid, qos=GUARANTEED)

    def numa(self, cluster: Cluster) -> list[int]:
        mask = cluster.nodes[self.node].numa_mask_of(self.allocations)
        return [i for i in range(mask.bit_length()) if mask >> i & 1]


def running_pods(cluster: Cluster, priorities: Mapping[str, int] | None = None) -> list[RunningPod]:
    """Every pod holding an allocation, by node then uid."""
    priorities = priorities or {}
    out = []
    for name in sorted(cluster.nodes):
        by_pod: dict[str, list[Allocation]] = {}
        for a in cluster.nodes[name].allocations:
            by_pod.setdefault(a.pod, []).append(a)
        out += [RunningPod(uid, name, tuple(allocs), priorities.get(uid, 0)) for uid, allocs in sorted(by_pod.items())]
    return out


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as make room honours it: its `namespace/name`, the disruptions it allows now, and the
    running pods (uids) it covers. A plan may move or evict at most `allowed` of them."""

    name: str
    allowed: int
    pods: frozenset[str]


@dataclass(frozen=True)
class Rules:
    """What may not move: pods of the target, pods in `protected_namespaces`, pods at or above
    `max_priority` (None: no limit), pods matching a `pinned` pattern (`namespace/name`, shell
    wildcards), pods a PodDisruptionBudget covers that allows no disruption; and no plan disrupts more pods of a
    budget than it allows (`over_budget`). With `allow_evictions`, movable pods of lower priority than the target
    may be evicted (stopped, not placed again) when moves alone cannot make room."""

    protected_namespaces: frozenset[str] = frozenset(DEFAULT_PROTECTED)
    max_priority: int | None = None
    pinned: tuple[str, ...] = ()
    allow_evictions: bool = False
    budgets: tuple[Budget, ...] = ()
    # the pinned patterns once compiled: names without wildcards a set, the rest one regular expression, so a
    # pod costs one lookup and one match whatever the number of patterns (not one fnmatch per pattern)
    _literal: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    _wildcards: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _budgets_of: Mapping[str, tuple[Budget, ...]] = field(init=False, repr=False, compare=False,
                                                          default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "budgets", tuple(self.budgets))
        covering: dict[str, tuple[Budget, ...]] = {}
        for budget in self.budgets:
            for uid in budget.pods:
                covering[uid] = (*covering.get(uid, ()), budget)
        object.__setattr__(self, "_budgets_of", covering)
        object.__setattr__(self, "protected_namespaces", frozenset(self.protected_namespaces))
        object.__setattr__(self, "pinned", tuple(self.pinned))
        wild = [p for p in self.pinned if any(c in p for c in "*?[")]
        object.__setattr__(self, "_literal", frozenset(p for p in self.pinned if p not in wild))
        object.__setattr__(self, "_wildcards", re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in wild))
                           if wild else None)
        if self.max_priority is not None and (isinstance(self.max_priority, bool)
                                              or not isinstance(self.max_priority, int)):
            raise RequestError(f"max_priority: must be an integer, not {self.max_priority!r}", "max_priority")

    def refusal(self, pod: RunningPod, target: Collection[str]) -> str | None:
        """Why `pod` may not move (None: it may)."""
        if pod.uid in target:
            return "a pod of the target"
        if pod.namespace in self.protected_namespaces:
            return f"namespace {pod.namespace} is protected"
        if self.max_priority is not None and pod.priority >= self.max_priority:
            return f"priority {pod.priority} is at or above {self.max_priority}"
        if pod.uid in self._literal or (self._wildcards is not None and self._wildcards.match(pod.uid)):
            return "pinned"
        closed = next((b for b in self._budgets_of.get(pod.uid, ()) if b.allowed <= 0), None)
        if closed is not None:
            return f"PodDisruptionBudget {closed.name} allows no disruption"
        return None

    def over_budget(self, pods: Iterable[RunningPod]) -> str | None:
        """Why moving (or evicting) all of `pods` together disrupts more than a budget allows (None: it does not)."""
        taken: dict[Budget, int] = {}
        for pod in pods:
            for budget in self._budgets_of.get(pod.uid, ()):
                taken[budget] = taken.get(budget, 0) + 1
        over = next((b for b, n in taken.items() if n > b.allowed), None)
        if over is None:
            return None
        return f"{taken[over]} pods of PodDisruptionBudget {over.name} disrupted, which allows {over.allowed}"

    def evictable(self, pod: RunningPod, target_priority: int) -> bool:
        return self.allow_evictions and pod.priority < target_priority


class MoveDict(TypedDict):
    namespace: str
    pod: str
    from_node: str
    from_numa: list[int]
    from_cpus: str
    cpus: int
    priority: int
    to_node: NotRequired[str]  # the three absent for an eviction
    to_numa: NotRequired[list[int]]
    to_cpus: NotRequired[str]


@dataclass(frozen=True)
class Move:
    """A pod taken off `pod.node` and re-admitted on `to_node` with `to_cpus`; `to_node` None: evicted."""

    pod: RunningPod
    to_node: str | None
    to_cpus: CPUSet = field(default_factory=CPUSet)
    to_numa: tuple[int, ...] = ()

    def to_dict(self, cluster: Cluster) -> MoveDict:
        out: MoveDict = {"namespace": self.pod.namespace, "pod": self.pod.name, "from_node": self.pod.node,
               "from_numa": self.pod.numa(cluster), "from_cpus": str(self.pod.cpus), "cpus": self.pod.cpu_count,
               "priority": self.pod.priority}
        if self.to_node is not None:
            out["to_node"], out["to_numa"], out["to_cpus"] = self.to_node, list(self.to_numa), str(self.to_cpus)
        return out


@dataclass
class Check:
    """A plan carried out on a copy: `ok`, the target's session and the cluster it left (moved pods
    re-admitted), the moves with the CPUs they got, and why it failed."""

    ok: bool
    result: SessionResult | None
    cluster: Cluster
    moves: list[Move]
    reason: str = ""


class RoomStats(TypedDict, total=False):
    engine_s: float
    options_evaluated: int  # these absent when the target fits now
    sessions: int
    checks: int
    target_pods_now: int
    shortfall: int
    movable: int  # pods the rules let the search move
    not_movable: dict[str, int]
    failed_checks: dict[str, int]
    bound: str  # no plan: the bound the search stopped at (room._bound)


class AfterDict(TypedDict):
    pods_placed: int
    topology_affinity_errors: int
    admission_errors: int


class RoomPlanDict(TypedDict):
    fits_now: bool
    found: bool
    minimal: bool
    lower_bound: int
    reason: str
    moves: list[MoveDict]
    evictions: list[MoveDict]
    moved_cpus: int
    after: AfterDict | None
    stats: RoomStats


@dataclass
class RoomPlan:
    """The answer. `found`: a verified plan (`check` is its carrying out, with the target's session);
    `moves` and `evictions` in the order they are carried out; `minimal`: proven the fewest pods moved,
    then CPUs; `lower_bound`: the fewest pods any plan must move, as proven; `reason`: why none."""

    fits_now: bool
    found: bool
    moves: list[Move] = field(default_factory=list)
    evictions: list[Move] = field(default_factory=list)
    minimal: bool = False
    lower_bound: int = 0
    check: Check | None = None
    reason: str = ""
    stats: RoomStats = field(default_factory=RoomStats)

    @property
    def moved_cpus(self) -> int:
        return sum(m.pod.cpu_count for m in self.moves)

    def to_dict(self, cluster: Cluster) -> RoomPlanDict:
        counts = self.check.result.counts if self.check is not None and self.check.result is not None else None
        return {
            "fits_now": self.fits_now, "found": self.found, "minimal": self.minimal,
            "lower_bound": self.lower_bound, "reason": self.reason,
            "moves": [m.to_dict(cluster) for m in self.moves],
            "evictions": [m.to_dict(cluster) for m in self.evictions],
            "moved_cpus": self.moved_cpus,
            "after": None if counts is None else {"pods_placed": counts["placed"],
                                                  "topology_affinity_errors": counts["topology_affinity_errors"],
                                                  "admission_errors": counts["admission_errors"]},
            "stats": self.stats,
        }


def take_off(cluster: Cluster, pod: RunningPod) -> None:
    """Release `pod` on its node, with its share of the scheduler's tally."""
    cluster.release(pod.node, pod.uid)
    t = cluster.tally[pod.node]
    req = Request.of(pod.pod())
    t.cpu_milli -= req.cpu_milli
    t.memory -= req.memory
    for r, n in req.devices:
        t.devices[r] = t.devices.get(r, 0) - n


def put_on(cluster: Cluster, pod: RunningPod, node: str) -> Move | None:
    """Admit `pod` on `node` as its kubelet would (None: refused by resource fit or the kubelet, or
    given back exactly what it held: not a move)."""
    spec = pod.pod()
    req = Request.of(spec)
    if cluster.fit(node, req) is not None:
        return None
    target = cluster.nodes[node]
    res = admit_pod(target, spec, commit=False)
    if not res.admitted:
        return None
    cpus = res.cpus
    if node == pod.node and cpus == pod.cpus:
        return None
    for a in res.allocations:
        target.allocate(a)
    cluster.add_request(node, req)
    cluster.refresh(node)
    mask = target.numa_mask_of(res.allocations)
    return Move(pod, node, cpus, tuple(i for i in range(mask.bit_length()) if mask >> i & 1))


def session_ok(result: SessionResult, job: Job) -> str:
    """Why the target's session does not count as a fit ('' when it does): its gang committed and
    no pod was refused by a kubelet."""
    counts = result.counts
    if counts["topology_affinity_errors"]:
        return f"{counts['topology_affinity_errors']} TopologyAffinityErrors"
    if counts["admission_errors"]:
        return f"{counts['admission_errors']} admission errors"
    if not all(j["committed"] for j in result.jobs):
        return f"job {job.name}: fewer than minAvailable ({job.min_available}) pods placed"
    return ""


def target_session(cluster: Cluster, job: Job, profile: str | Profile, held: Collection[str],
                   explain: bool = False) -> SessionResult:
    """The target's dry run on `cluster` (mutated)."""
    if explain:
        return run_session(cluster, [job], profile=profile, held=held)
    return run_session(cluster, [job], profile=profile, held=held, explain_names=0, explain_groups=0)


def carry_out(cluster: Cluster, job: Job, profile: str | Profile, held: Collection[str],
              moves: Sequence[tuple[RunningPod, str | None]], explain: bool = False) -> Check:
    """Carry out a plan on a copy of `cluster` (left unchanged) and check it (module docstring).
    `moves`: (pod, destination node or None to evict), in order."""
    work = cluster.copy()
    for pod, _dest in moves:
        take_off(work, pod)
    result = target_session(work, job, profile, held, explain)
    reason = session_ok(result, job)
    if reason:
        return Check(False, result, work, [], reason)
    used = {p.node for p in result.pods if p.status == PodStatus.ADMITTED}
    idle = sorted({pod.node for pod, _d in moves} - used)
    if idle:
        return Check(False, result, work, [], f"no pod of the target goes to {idle[0]}, which a move frees")
    done = []
    for pod, dest in moves:
        if dest is None:
            done.append(Move(pod, None))
            continue
        move = put_on(work, pod, dest)
        if move is None:
            return Check(False, result, work, done, f"{pod.uid} cannot be admitted on {dest}")
        done.append(move)
    return Check(True, result, work, done)


def shape_job(pod: Pod, count: int, policy: str | None, namespace: str = "numaweb-make-room") -> Job:
    """A target given as a pod shape × count with a task topology policy: a gang of all of them."""

    return Job("make-room", (Task("pod", replace(pod, namespace=namespace), count, policy),), namespace=namespace)


def order_moves(pods: Iterable[RunningPod]) -> list[RunningPod]:
    """The order moved pods are placed again in: the largest first (harder to place), then by uid."""
    return sorted(pods, key=lambda p: (-p.cpu_count, p.uid))


__all__ = ["DEFAULT_PROTECTED", "Check", "Move", "Rules", "RunningPod", "carry_out", "order_moves", "put_on",
           "running_pods", "session_ok", "shape_job", "take_off", "target_session"]
