"""Scheduler profiles: how a session judges one pod on one node, scores the nodes that pass, and
what placing (or rolling back) a pod changes in the profile's own view of the cluster.

A `Profile` is a small immutable object carrying its options (the volcano profile its plugin
weight); `profile.open(cluster)` starts one session's use of it and returns the object whose hooks
the session calls:

- `state_key(node)`: what besides the node's shape, settings and request tally decides this
  profile's verdicts there (nodes with equal keys are evaluated once, as a class);
- `prepare(pod)`: the profile's reading of a pod, once per pod;
- `evaluate(node, pod, prepared)` → `NodeVerdict` for a node that passed the resource-fit filter;
- `scores(prepared, verdicts)` → one score per passing verdict, or None when the profile does not
  score this pod;
- `tie_break(node, verdict)`: orders nodes of equal score and NUMA span before their names;
- `on_place` / `on_rollback`: a pod was bound to a node / its gang was rolled back;
- `close()`: what the profile hands over when the session ends.

The profiles (ENGINE.md §4.2):
- `volcano`: Volcano's numa-aware plugin as upstream decides, driven through `volcano.VolcanoPlugin`:
  task policy must equal the node's, CPU only, per container, init containers ignored, legacy merge,
  NUMA-span score × `weight` (none when the task has no policy); allocate events keep the plugin's
  in-session free-CPU view, and its close hand-off becomes `SessionResult.volcano_close`.
- `aligned`: the kubelet's own admission run as the predicate on the node's current state (node
  scope, CPU + memory + hugepages + devices, init containers, modern merge and options); the score
  is the same NUMA-span normalisation over the predicted allocation (weight 1).
- `unaware`: resource fit only, no score (the default kube-scheduler's view of NUMA: none).
- `kai`: KAI-Scheduler's `numa` plugin driven through `kai.KaiPlugin`: the zones each node's NRT
  would publish, filter on single-numa-node / restricted, ledger and score (100 / span) also on
  best-effort, CPU and memory taken as aligned for Guaranteed pods; its zone ledger is charged on
  place and credited on rollback.
- `koordinator`: Koordinator's NodeNUMAResource plugin driven through `koordinator.NodeNUMAResource`:
  the node's NUMA topology policy (as koordlet publishes the kubelet's), CPU bind policy checks, the
  NUMA topology manager's hints and merge with exclusivity, its Score as the tie-break, CPUs and NUMA
  amounts reserved on place and released on rollback.

`PROFILES` maps each name to its class, in the order pages list them; `get_profile(name)` builds one.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, cast

from ..errors import PolicyError, check_int
from ..kai.plugin import NOT_ALIGNED, KaiPlugin
from ..kai.requests import PodRequests
from ..kai.zones import Amounts, ZoneTopology
from ..koordinator.cpu_accumulator import FULL_PCPUS, CPUTopology
from ..koordinator.plugin import (
    UNRESOLVABLE,
    NodeNUMAResource,
    PodState,
    cpu_topology,
    node_options,
    pod_requests,
    pre_filter,
)
from ..kubelet.admission import admit_pod
from ..model.pods import Pod
from ..volcano.cache import NumaCache
from ..volcano.cpumanager.provider import NumaModel
from ..volcano.numaaware import (
    PASS_ASSIGNED,
    PASS_NOT_GUARANTEED,
    PASS_SKIPPED,
    REJECT,
    UNSCHEDULABLE_AND_UNRESOLVABLE,
    CloseEntry,
    VolcanoPlugin,
    VolcanoTask,
    normalize_scores,
)
from .cluster import Cluster
from .explain import FILTERED, PASSED, SKIPPED, UNSCHEDULABLE, NodeVerdict


class ProfileSession:
    """One session's use of a profile. The defaults: no extra state, nothing scored, nothing to hand over."""

    def state_key(self, name: str) -> Hashable:
        return None

    def prepare(self, pod: Pod) -> object:
        return None

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        raise NotImplementedError

    def scores(self, prepared: object, verdicts: Sequence[NodeVerdict]) -> list[int] | None:
        """One score per verdict, or None. The session passes one verdict per distinct (outcome, NUMA
        count) among the passing ones, so a score may depend on those two and on the set of them
        (e.g. the largest NUMA count), not on anything else in the verdict or on how many nodes share it."""
        return None

    def tie_break(self, name: str, verdict: NodeVerdict) -> float:
        """Orders nodes with equal score and NUMA count before their names (lower first); 0: by name.
        Asked once per node class, so it may depend on the node's shape and settings, not its name."""
        return 0.0

    def on_place(self, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        """The scheduler bound `pod` to node `name` (before the kubelet's admission there)."""

    def on_rollback(self, pod: Pod, name: str) -> None:
        """The pod's gang did not reach minAvailable: undo what `on_place` did."""

    def close(self) -> list[CloseEntry]:
        return []


@dataclass(frozen=True)
class Profile:
    """A scheduler profile and its options; subclasses set `name` and `summary` and implement `open`."""

    name: ClassVar[str]
    summary: ClassVar[str]

    #: the numa-aware plugin weight; only the volcano profile scores with it
    weight: int = 1

    def __post_init__(self) -> None:
        check_int(self.weight, "numa-aware weight", None)

    def open(self, cluster: Cluster) -> ProfileSession:
        raise NotImplementedError


# -- volcano ---------------------------------------------------------------------------------------------


class _VolcanoSession(ProfileSession):
    """Drives one `VolcanoPlugin` over the cluster: predicate on a class's first node, scores from the
    verdicts' NUMA counts, allocate on place, deallocate on rollback, the plugin's close at the end.
    The `prepared` the session hands back is what `prepare` returned: a `VolcanoTask`."""

    def __init__(self, cluster: Cluster, weight: int, cache: NumaCache | None) -> None:
        models: dict[int, NumaModel | None] = {}
        nodes = {}
        for name, node in cluster.nodes.items():
            static_id = cluster.static_id(name)
            if static_id not in models:
                models[static_id] = NumaModel.from_node(node) if node.numatopology else None
            model = models[static_id]
            # the exporter's allocatable: every CPU the kubelet has not pinned (reserved ones included)
            free: int | None = node.free_cpus | node.reserved_cpus.mask
            if cache is not None and name in cache.nodes:
                view = cache.refresh(name)  # the CRD's view minus the pods Volcano placed and nobody pinned yet
                if view is None:
                    model = None
                else:
                    free = view.numares["cpu"][0] if "cpu" in view.numares else None
            nodes[name] = (model, free)
        self.plugin = VolcanoPlugin(nodes, weight)
        self.cache = cache

    def state_key(self, name: str) -> Hashable:
        return self.plugin.free[name]

    def prepare(self, pod: Pod) -> VolcanoTask:
        return VolcanoTask.from_pod(pod)

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        v = self.plugin.simulate(cast(VolcanoTask, prepared), name)
        if v.outcome == REJECT:
            outcome = UNSCHEDULABLE if v.code == UNSCHEDULABLE_AND_UNRESOLVABLE else FILTERED
            return NodeVerdict(outcome, reason=v.reason, code=v.code, volcano=v)
        if v.outcome in (PASS_NOT_GUARANTEED, PASS_SKIPPED):
            return NodeVerdict(SKIPPED, volcano=v)
        return NodeVerdict(PASSED, volcano=v, numa_count=v.numa_count, numa_mask=v.numa_mask,
                           cpus=v.assignment or 0)

    def scores(self, prepared: object, verdicts: Sequence[NodeVerdict]) -> list[int] | None:
        # batchNodeOrderFn runs only for a task with an assignment somewhere this session
        if not any(v.volcano is not None and v.volcano.outcome == PASS_ASSIGNED for v in verdicts):
            return None
        return self.plugin.scores(cast(VolcanoTask, prepared), [v.numa_count for v in verdicts])

    def on_place(self, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        v = verdict.volcano
        if v is not None and v.outcome == PASS_ASSIGNED:
            # the class's verdict holds for every member: record it on the chosen node, then AllocateFunc
            self.plugin.record(cast(VolcanoTask, prepared), name, v.assignment or 0)
            self.plugin.allocate(pod.uid, name)

    def on_rollback(self, pod: Pod, name: str) -> None:
        self.plugin.deallocate(pod.uid, name)

    def close(self) -> list[CloseEntry]:
        handed = self.plugin.close()
        if self.cache is not None:
            self.cache.add_session_close(handed)
        return handed


@dataclass(frozen=True)
class VolcanoProfile(Profile):
    """`cache`: Volcano's scheduler cache of a Volcano-managed cluster kept across sessions
    (ENGINE.md §3.8); each session starts from its views and hands its placements back to it.
    Without one, every session sees the nodes as the kubelet has pinned them."""

    name: ClassVar[str] = "volcano"
    summary: ClassVar[str] = "Volcano's numa-aware plugin as upstream decides: CPU only, per container, legacy merge"

    cache: NumaCache | None = field(default=None, compare=False)

    def open(self, cluster: Cluster) -> ProfileSession:
        return _VolcanoSession(cluster, self.weight, self.cache)


# -- aligned ---------------------------------------------------------------------------------------------


class _AlignedSession(ProfileSession):
    def __init__(self, cluster: Cluster, distance_tie_break: bool = False) -> None:
        self.cluster = cluster
        self.nodes = cluster.nodes
        self.distance_tie_break = distance_tie_break
        self.distances: dict[tuple[int, int], float] = {}  # (node shape, NUMA mask) → mean distance

    def state_key(self, name: str) -> Hashable:
        node = self.nodes[name]
        return (node.free_cpus, frozenset(node.used_devices),
                tuple((n, tuple(sorted((r, v) for r, v in res.items() if v)))
                      for n, res in sorted(node.memory_used.items())))

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        node = self.nodes[name]
        res = admit_pod(node, pod, commit=False)
        if not res.admitted:
            return NodeVerdict(UNSCHEDULABLE, reason=res.reason, code=UNSCHEDULABLE_AND_UNRESOLVABLE,
                               admission=res)
        mask = node.numa_mask_of(res.allocations)
        return NodeVerdict(PASSED, admission=res, numa_count=mask.bit_count(), numa_mask=mask, cpus=res.cpus.mask)

    def scores(self, prepared: object, verdicts: Sequence[NodeVerdict]) -> list[int] | None:
        return normalize_scores([v.numa_count for v in verdicts])

    def tie_break(self, name: str, verdict: NodeVerdict) -> float:
        """With `distance_tie_break`: the placement's mean NUMA distance on the node (0 when the machine
        reports none), cached per node shape and mask."""
        if not self.distance_tie_break:
            return 0.0
        key = (self.cluster.static_id(name), verdict.numa_mask)
        value = self.distances.get(key)
        if value is None:
            value = self.distances[key] = self.nodes[name].topology.mean_distance(verdict.numa_mask) or 0.0
        return value


@dataclass(frozen=True)
class AlignedProfile(Profile):
    """`distance_tie_break`: among equally narrow placements on different nodes, prefer the lowest
    mean NUMA distance (what `prefer-closest-numa-nodes` does between masks inside one node)."""

    name: ClassVar[str] = "aligned"
    summary: ClassVar[str] = ("predicts the kubelet exactly: node scope, CPU, memory, hugepages and devices, "
                              "modern merge")

    distance_tie_break: bool = False

    def open(self, cluster: Cluster) -> ProfileSession:
        return _AlignedSession(cluster, self.distance_tie_break)


# -- unaware ---------------------------------------------------------------------------------------------


class _UnawareSession(ProfileSession):
    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        return NodeVerdict(PASSED)


@dataclass(frozen=True)
class UnawareProfile(Profile):
    name: ClassVar[str] = "unaware"
    summary: ClassVar[str] = "resource fit only, no NUMA awareness (the default kube-scheduler's view)"

    def open(self, cluster: Cluster) -> ProfileSession:
        return _UnawareSession()


# -- kai -------------------------------------------------------------------------------------------------


class _KaiSession(ProfileSession):
    """Drives one `KaiPlugin`: the predicate and expected placement on a class's first node, the
    score from the verdicts' spans, the placement re-evaluated on the chosen node and charged there
    (upstream's NumaPlacementFn, then AllocateFunc), credited back on rollback. A verdict's
    `numa_count` is the span KAI assumes for scoring (0: it scores the node 0, or does not score the
    pod), its `numa_mask` the zones it charges."""

    def __init__(self, cluster: Cluster, ignore: frozenset[str]) -> None:
        shapes: dict[int, ZoneTopology] = {}  # one per node shape and settings
        nodes: dict[str, tuple[ZoneTopology | None, Amounts]] = {}
        for name, node in cluster.nodes.items():
            static_id = cluster.static_id(name)
            topo = shapes.get(static_id)
            if topo is None:
                topo = shapes[static_id] = ZoneTopology.of(node)
            nodes[name] = (topo, topo.available(node))
        self.requests: dict[tuple[object, ...], PodRequests] = {}
        self.plugin = KaiPlugin(nodes, ignore)

    def state_key(self, name: str) -> Hashable:
        return self.plugin.available[name]

    def prepare(self, pod: Pod) -> PodRequests:
        """One reading per pod shape, so the plugin's per-pod caches serve every pod of that shape."""
        # requests and limits decide the QoS class too, so it need not be computed for the key
        key = (pod.qos, *((c.kind, tuple(c.requests.items()), tuple(c.limits.items())) for c in pod.all_containers()))
        req = self.requests.get(key)
        if req is None:
            req = self.requests[key] = PodRequests.of(pod)
        return req

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        req = cast(PodRequests, prepared)
        e = self.plugin.evaluate(req, name)
        if not e.aligned:
            return NodeVerdict(FILTERED, reason=NOT_ALIGNED, code="Unschedulable")
        # a pod the plugin does not score carries no span, so the session's next key does not rank by it
        span = e.span if self.plugin.max_zones and self.plugin.wants_numa(req) else 0
        return NodeVerdict(PASSED, numa_count=span, numa_mask=self.plugin.zone_mask(name, e.placement))

    def scores(self, prepared: object, verdicts: Sequence[NodeVerdict]) -> list[int] | None:
        values = self.plugin.scores(cast(PodRequests, prepared), [v.numa_count for v in verdicts])
        # upstream's float 100/span, floored: the session's next key (fewest zones) keeps its order
        return None if values is None else [int(v) for v in values]

    def on_place(self, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        e = self.plugin.evaluate(cast(PodRequests, prepared), name)
        self.plugin.allocate(pod.uid, name, e.placement)

    def on_rollback(self, pod: Pod, name: str) -> None:
        self.plugin.deallocate(pod.uid, name)


@dataclass(frozen=True)
class KaiProfile(Profile):
    """`ignore_list`: upstream's `ignoreList` argument (resources reported per zone but not aligned)."""

    name: ClassVar[str] = "kai"
    summary: ClassVar[str] = ("KAI-Scheduler's numa plugin: filters on single-numa-node and restricted, "
                              "scores 100/span, per-zone reservation within the session")

    ignore_list: frozenset[str] = frozenset()

    def open(self, cluster: Cluster) -> ProfileSession:
        return _KaiSession(cluster, self.ignore_list)


# -- koordinator ----------------------------------------------------------------------------------------


def _amounts(per_numa: Mapping[int, Mapping[str, int]]) -> Hashable:
    return tuple(sorted((n, tuple(sorted(r.items()))) for n, r in per_numa.items()))


class _KoordinatorSession(ProfileSession):
    """Drives one `NodeNUMAResource`: Filter on a class's first node; Koordinator's Score there as the
    tie-break (no verdict carries a NUMA count, so the session ranks by it alone); on place the Filter
    again on the chosen node for its affinity, then Reserve; Unreserve on rollback. A verdict's
    `numa_mask` is the NUMA affinity the plugin admitted (0: none)."""

    def __init__(self, cluster: Cluster, profile: KoordinatorProfile) -> None:
        self.cluster = cluster
        self.nodes = cluster.nodes
        shapes: dict[int, CPUTopology] = {}
        for name, node in cluster.nodes.items():
            static_id = cluster.static_id(name)
            if static_id not in shapes:
                shapes[static_id] = cpu_topology(node)
        self.plugin = NodeNUMAResource({name: node_options(node, shapes[cluster.static_id(name)])
                                        for name, node in cluster.nodes.items()},
                                       profile.default_cpu_bind_policy, profile.scoring_strategy,
                                       profile.numa_scoring_strategy)
        self.states: dict[tuple[object, ...], PodState] = {}
        self.keys: dict[str, Hashable] = {}
        self.last_score: dict[str, int] = {}
        self.verdicts: dict[tuple[object, ...], tuple[NodeVerdict, int]] = {}

    def state_key(self, name: str) -> Hashable:
        """The node as published at the session's start (its zones' free amounts and reserved CPUs)
        and what the plugin has reserved there since; the request tally is the session's own key."""
        key = self.keys.get(name)
        if key is None:
            opts, alloc = self.plugin.nodes[name], self.plugin.allocs[name]
            key = self.keys[name] = (
                _amounts(opts.numa_resources), opts.reserved, frozenset(alloc.cpus.items()), _amounts(alloc.numa),
                tuple(alloc.status(len(opts.numa_resources))))
        return key

    def prepare(self, pod: Pod) -> PodState:
        requests = pod_requests(pod)
        key = tuple(sorted(requests.items()))
        state = self.states.get(key)
        if state is None:
            # engine pods carry no Koordinator labels or annotations: not LSE/LSR, no NUMA spec
            state = self.states[key] = pre_filter(requests, {})
        return state

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        """Pod shapes the plugin reads alike (same requests and spec) share their verdicts per node class."""
        state = cast(PodState, prepared)
        tally = self.cluster.tally[name]
        key = (state, self.cluster.static_id(name), tally.cpu_milli, tally.memory, self.state_key(name))
        known = self.verdicts.get(key)
        if known is None:
            known = self.verdicts[key] = self._evaluate(name, pod, state)
        self.last_score[name] = known[1]
        return known[0]

    def _evaluate(self, name: str, pod: Pod, state: PodState) -> tuple[NodeVerdict, int]:
        status = self.plugin.filter(state, name, pod.uid)
        if not status.ok:
            outcome = UNSCHEDULABLE if status.code == UNRESOLVABLE else FILTERED
            return NodeVerdict(outcome, reason=status.reason, code=status.code), 0
        cpu, memory, _devices = self.cluster.allocatable(name)
        tally = self.cluster.tally[name]
        score = self.plugin.score(state, name, pod.uid, status.hint, {"cpu": tally.cpu_milli, "memory": tally.memory},
                                  {"cpu": cpu, "memory": memory})
        return NodeVerdict(PASSED, numa_mask=status.hint or 0), score

    def tie_break(self, name: str, verdict: NodeVerdict) -> float:
        return -float(self.last_score.get(name, 0))

    def on_place(self, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        state = cast(PodState, prepared)
        status = self.plugin.filter(state, name, pod.uid)
        if status.ok:
            self.plugin.reserve(state, name, pod.uid, status.hint)
            self.keys.pop(name, None)

    def on_rollback(self, pod: Pod, name: str) -> None:
        self.plugin.unreserve(pod.uid)
        self.keys.pop(name, None)


@dataclass(frozen=True)
class KoordinatorProfile(Profile):
    """Upstream's NodeNUMAResourceArgs: `default_cpu_bind_policy` (DefaultCPUBindPolicy),
    `scoring_strategy` and `numa_scoring_strategy` (LeastAllocated or MostAllocated, weights cpu 1 and
    memory 1); the defaults are upstream's."""

    name: ClassVar[str] = "koordinator"
    summary: ClassVar[str] = ("Koordinator's NodeNUMAResource plugin: its NUMA topology policies, CPU bind "
                              "policies and exclusivity, CPUs and NUMA amounts reserved within the session")

    default_cpu_bind_policy: str = FULL_PCPUS
    scoring_strategy: str = "LeastAllocated"
    numa_scoring_strategy: str = "LeastAllocated"

    def __post_init__(self) -> None:
        super().__post_init__()
        for value, what in ((self.scoring_strategy, "scoring strategy"),
                            (self.numa_scoring_strategy, "NUMA scoring strategy")):
            if value not in ("LeastAllocated", "MostAllocated"):
                raise PolicyError(f"unknown Koordinator {what} {value!r}; expected LeastAllocated or MostAllocated")

    def open(self, cluster: Cluster) -> ProfileSession:
        return _KoordinatorSession(cluster, self)


#: every profile by name, in the order pages list them
PROFILES: dict[str, type[Profile]] = {p.name: p for p in (VolcanoProfile, AlignedProfile, UnawareProfile,
                                                          KaiProfile, KoordinatorProfile)}


def get_profile(profile: str | Profile, weight: int = 1) -> Profile:
    """The profile named `profile` with the numa-aware `weight` (a Profile object is returned as is)."""
    if isinstance(profile, Profile):
        return profile
    cls = PROFILES.get(profile) if isinstance(profile, str) else None
    if cls is None:
        raise PolicyError(f"unknown scheduler profile {profile!r}; expected one of: {', '.join(PROFILES)}")
    return cls(weight=weight)
