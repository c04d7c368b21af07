"""Profiles of other schedulers' NUMA plugins (ENGINE.md §4.2), each driving its plugin's model:

- `nrt`: scheduler-plugins' NodeResourceTopologyMatch driven through `nrt/`: Filter on single-numa-node
  nodes' zones, every other node passing unchecked (skipped), the strategy's score × `weight` per
  node, Reserve/Unreserve into its over-reserving cache on place and rollback.
- `kai`: KAI-Scheduler's `numa` plugin driven through `kai.KaiPlugin`: the zones each node's NRT
  would publish, filter on single-numa-node / restricted, ledger and score (100 / span) also on
  best-effort, CPU and memory taken as aligned for Guaranteed pods; its zone ledger is charged on
  place and credited on rollback.
- `koordinator`: Koordinator's NodeNUMAResource plugin driven through `koordinator.NodeNUMAResource`:
  the node's NUMA topology policy (as koordlet publishes the kubelet's), CPU bind policy checks, the
  NUMA topology manager's hints and merge with exclusivity, its Score as the tie-break, CPUs and NUMA
  amounts reserved on place and released on rollback.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, cast

from ..errors import PolicyError, check_int
from ..kai.plugin import NOT_ALIGNED, KaiPlugin
from ..kai.requests import PodRequests
from ..kai.zones import Amounts, ZoneTopology
from ..koordinator.allocation import SPREAD_BY_PCPUS
from ..koordinator.cpu_accumulator import FULL_PCPUS, MOST_ALLOCATED, CPUTopology
from ..koordinator.plugin import (
    UNRESOLVABLE,
    NodeNUMAResource,
    PodState,
    cpu_topology,
    node_options,
    pod_requests,
    pre_filter,
)
from ..model.pods import Pod
from ..nrt.cache import OverReserve
from ..nrt.filter import filter_pod
from ..nrt.score import LEAST_ALLOCATED, STRATEGIES, score_pod
from ..nrt.zones import PodView, Zone, conf_of, node_resources, states_memory, zones_of
from .cluster import Cluster
from .explain import FILTERED, PASSED, SKIPPED, UNSCHEDULABLE, NodeVerdict
from .profile import Profile, ProfileSession

# -- nrt -------------------------------------------------------------------------------------------------


class _NRTSession(ProfileSession):
    """scheduler-plugins' NodeResourceTopologyMatch: Filter and Score on each node's NRT zones as the
    session began, minus the pods it assumed there (the reserve cache); `prepared` is the pod's cache
    key, its reading (`PodView`), and that reading without memory for nodes whose memory is unknown."""

    def __init__(self, cluster: Cluster, profile: NRTProfile) -> None:
        self.profile = profile
        self.weights = dict(profile.resource_weights)
        self.cache = OverReserve({name: zones_of(node) if node.numatopology else None
                                  for name, node in cluster.nodes.items()})
        self.confs = {name: conf_of(node) for name, node in cluster.nodes.items()}
        self.allocatable = {name: node_resources(node) for name, node in cluster.nodes.items()}
        self.memoryless = {name for name, node in cluster.nodes.items() if not states_memory(node)}
        self.current: dict[str, Sequence[Zone] | None] = {}
        self.keys: dict[str, Hashable] = {}
        for name in cluster.nodes:
            self._refresh(name)

    def _refresh(self, name: str) -> None:
        zones = self.current[name] = self.cache.view(name)
        self.keys[name] = None if zones is None else tuple(tuple(z.resources.values()) for z in zones)

    def state_key(self, name: str) -> Hashable:
        return self.keys[name]

    def prepare(self, pod: Pod) -> tuple[str, PodView, PodView]:
        return f"{pod.namespace}/{pod.name}", PodView.of(pod), PodView.of(pod, memory=False)

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        zones, conf = self.current[name], self.confs[name]
        _key, view, memoryless = cast(tuple[str, PodView, PodView], prepared)
        if name in self.memoryless:
            view = memoryless
        result = filter_pod(view, zones, conf, self.allocatable[name])
        if not result.passed:
            return NodeVerdict(FILTERED, reason=result.explain(), code=result.code)
        score = score_pod(view, zones, conf, self.profile.strategy, self.weights) * self.profile.weight
        mask = result.numa_mask
        return NodeVerdict(PASSED if result.checked else SKIPPED, numa_count=mask.bit_count(), numa_mask=mask,
                           score=score)

    def on_place(self, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        key, view, _ = cast(tuple[str, PodView, PodView], prepared)
        self.cache.reserve(name, key, view.effective)
        self._refresh(name)

    def on_rollback(self, pod: Pod, name: str) -> None:
        self.cache.unreserve(name, f"{pod.namespace}/{pod.name}")
        self._refresh(name)


@dataclass(frozen=True)
class NRTProfile(Profile):
    """`strategy`: the plugin's scoring strategy (LeastAllocated, its default, MostAllocated,
    BalancedAllocation, LeastNUMANodes); `resource_weights`: (resource, weight) pairs for the
    allocation strategies (default cpu 1, memory 1; unnamed resources weigh 1); `weight`: the
    plugin's weight in the scheduler profile, multiplying its score."""

    name: ClassVar[str] = "nrt"
    summary: ClassVar[str] = ("scheduler-plugins' NodeResourceTopologyMatch: single-numa-node nodes checked "
                              "zone by zone from their NRT, others unchecked")

    strategy: str = LEAST_ALLOCATED
    resource_weights: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.strategy not in STRATEGIES:
            raise PolicyError(f"strategy: unknown scoring strategy {self.strategy!r}; expected one of: "
                              f"{', '.join(STRATEGIES)}")
        for resource, w in self.resource_weights:
            if not isinstance(resource, str) or not resource:
                raise PolicyError("resource_weights: resource names must be non-empty strings")
            check_int(w, f"resource_weights: weight of {resource}", None)

    def open(self, cluster: Cluster) -> ProfileSession:
        return _NRTSession(cluster, self)
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

#: what NodeNUMAResourceArgs accepts: the scoring strategies (node and NUMA) and the DefaultCPUBindPolicy values
KOORDINATOR_STRATEGIES = ("LeastAllocated", MOST_ALLOCATED)
CPU_BIND_POLICIES = (FULL_PCPUS, SPREAD_BY_PCPUS)


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
        """The node as published at the session's start (its zones' free amounts and reserved CPUs, its
        NUMA topology and CPU bind policies, which its labels can set on nodes of one shape and settings)
        and what the plugin has reserved there since; the request tally is the session's own key."""
        key = self.keys.get(name)
        if key is None:
            opts, alloc = self.plugin.nodes[name], self.plugin.allocs[name]
            key = self.keys[name] = (
                _amounts(opts.numa_resources), opts.reserved, opts.numa_policy, opts.cpu_bind_policy,
                frozenset(alloc.cpus.items()), _amounts(alloc.numa), tuple(alloc.status(len(opts.numa_resources))))
        return key

    def prepare(self, pod: Pod) -> PodState:
        """PreFilter once per (requests, labels and annotations, priority): the pod's Koordinator QoS and
        priority classes, resource and NUMA topology specs, under the profile's DefaultCPUBindPolicy."""
        requests = pod_requests(pod)
        key = (tuple(sorted(requests.items())), pod.labels, pod.annotations, pod.priority)
        state = self.states.get(key)
        if state is None:
            meta = {**dict(pod.labels), **dict(pod.annotations)}
            state = self.states[key] = pre_filter(requests, meta, self.plugin.default_bind, pod.priority)
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
        for value, what, known in ((self.default_cpu_bind_policy, "default CPU bind policy", CPU_BIND_POLICIES),
                                   (self.scoring_strategy, "scoring strategy", KOORDINATOR_STRATEGIES),
                                   (self.numa_scoring_strategy, "NUMA scoring strategy", KOORDINATOR_STRATEGIES)):
            if value not in known:
                raise PolicyError(f"unknown Koordinator {what} {value!r}; expected {' or '.join(known)}")

    def open(self, cluster: Cluster) -> ProfileSession:
        return _KoordinatorSession(cluster, self)
