"""KAI's `numa` plugin over one session: the zone ledger of every node, the predicate, the expected
placement, the score and the allocate / deallocate events.

Gates (upstream `shouldFilter` / `shouldScore`): the predicate runs on single-numa-node and
restricted nodes, the ledger and the score also on best-effort ones; either only for a Guaranteed
pod or one that asks for a device the node reports per zone (devices align for every QoS class;
cpu, memory and hugepages only for Guaranteed pods). `none` nodes, and pods the gates leave out,
pass through. Score: 100 / the zones the pod is expected to span; a node that reports no zones is
assumed to span the cluster's largest zone count, a `none` node all of its zones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .evaluator import Need, Placement, project, solve
from .requests import PodRequests
from .zones import MODELED, SCORED, Amounts, ZoneTopology, is_qos_gated

#: the predicate's error (upstream errNotNumaAligned)
NOT_ALIGNED = "node cannot NUMA-align the pod's resources under its Topology Manager policy"
#: KAI's NUMA score weight (upstream scores.Numa)
NUMA_SCORE = 100


def node_score(span: int) -> float:
    """The NodeOrderFn's value for a pod expected to span `span` zones (0 for an infeasible node)."""
    return NUMA_SCORE / span if span else 0.0


@dataclass(frozen=True)
class Evaluation:
    """One pod on one node: `aligned` False when the predicate rejects; `placement` the zones KAI
    charges (empty when it does not account for the pod there); `span` the zones it assumes the
    pod spans for scoring (0: the node scores 0)."""

    aligned: bool
    placement: Placement
    span: int


@dataclass(frozen=True)
class _Reading:
    """A pod on one zone topology: whether the predicate and the ledger/score apply, and its units
    projected on the topology's resource columns."""

    filter: bool
    score: bool
    concurrent: list[Need]
    serial: list[Need]


class KaiPlugin:
    """`nodes`: per node, its zone topology (None: it publishes no NRT) and its zones' Available.
    `ignore`: upstream's `ignoreList`, resources reported per zone that the kubelet does not align."""

    def __init__(self, nodes: Mapping[str, tuple[ZoneTopology | None, Amounts]],
                 ignore: frozenset[str] = frozenset()) -> None:
        self.topo = {name: topo for name, (topo, _a) in nodes.items()}
        self.available = {name: avail for name, (_t, avail) in nodes.items()}
        self.ignore = ignore
        self.placed: dict[str, tuple[str, Placement]] = {}
        self._readings: dict[tuple[PodRequests, int], _Reading] = {}
        self._evaluations: dict[tuple[PodRequests, int, Amounts], Evaluation] = {}
        self.max_zones = max((len(t.numa_ids) for t in self.topo.values() if t is not None), default=0)
        #: devices (not cpu/memory/hugepages, not ignored) some best-effort/restricted/single node reports
        self.aware_devices = frozenset(r for t in self.topo.values() if t is not None and t.policy in SCORED
                                       for r in t.resources if not is_qos_gated(r) and r not in ignore)

    # -- gates -------------------------------------------------------------------------------------
    def _asks_device(self, req: PodRequests, topo: ZoneTopology) -> bool:
        return any(r in req.requested for r in topo.resources if not is_qos_gated(r) and r not in self.ignore)

    def _gated(self, req: PodRequests, topo: ZoneTopology | None, policies: tuple[str, ...]) -> bool:
        if topo is None or topo.policy not in policies:
            return False
        return req.guaranteed or self._asks_device(req, topo)

    def should_filter(self, req: PodRequests, name: str) -> bool:
        """Upstream's shouldFilter: does the predicate judge this pod on this node?"""
        return self._gated(req, self.topo[name], MODELED)

    def wants_numa(self, req: PodRequests) -> bool:
        """Scored at all: a Guaranteed pod, or one asking for a device some scored node reports per zone."""
        return req.guaranteed or any(r in req.requested for r in self.aware_devices)

    # -- evaluation --------------------------------------------------------------------------------
    def _reading(self, req: PodRequests, topo: ZoneTopology) -> _Reading:
        """The gates and the projected units of a pod on a zone topology, kept for the session."""
        reading = self._readings.get((req, id(topo)))
        if reading is None:
            aligned = frozenset(r for r in topo.resources
                                if r not in self.ignore and (req.guaranteed or not is_qos_gated(r)))
            concurrent, serial = req.for_scope(topo.scope)
            reading = self._readings[req, id(topo)] = _Reading(
                self._gated(req, topo, MODELED), self._gated(req, topo, SCORED),
                [project(u, topo.resources, aligned) for u in concurrent],
                [project(u, topo.resources, aligned) for u in serial])
        return reading

    def evaluate(self, req: PodRequests, name: str) -> Evaluation:
        """The predicate, the expected placement and the assumed span of one pod on one node (the
        same reading on the same zone topology and availability is answered once)."""
        topo = self.topo[name]
        if topo is None or not topo.numa_ids:
            return Evaluation(True, {}, self.max_zones)
        reading = self._reading(req, topo)
        key = (req, id(topo), self.available[name])
        known = self._evaluations.get(key)
        if known is not None:
            return known
        placement: Placement | None = {}
        if reading.score:
            placement = solve(topo, self.available[name], reading.concurrent, reading.serial)
        aligned = placement is not None or not reading.filter
        if topo.policy == "none" or not reading.score:
            span = len(topo.numa_ids)
        else:
            span = 0 if placement is None else max(1, len(placement))
        known = self._evaluations[key] = Evaluation(aligned, placement or {}, span)
        return known

    def scores(self, req: PodRequests, spans: Sequence[int]) -> list[float] | None:
        """The NodeOrderFn's values for the given spans; None when the plugin is silent for this pod
        (not NUMA-sensitive, or no node reports zones)."""
        if self.max_zones == 0 or not self.wants_numa(req):
            return None
        return [node_score(span) for span in spans]

    def zone_mask(self, name: str, placement: Placement) -> int:
        """The NUMA ids of a placement's zones, as a bitmask."""
        topo = self.topo[name]
        return 0 if topo is None else sum(1 << topo.numa_ids[z] for z in placement)

    # -- events ------------------------------------------------------------------------------------
    def allocate(self, uid: str, name: str, placement: Placement) -> None:
        """Charge a bound pod's placement against the node's in-cycle ledger (no-op when empty)."""
        self.placed[uid] = (name, placement)
        self._charge(name, placement, -1)

    def deallocate(self, uid: str, name: str) -> None:
        """Credit a rolled-back pod's placement back."""
        held = self.placed.pop(uid, None)
        if held is not None:
            self._charge(held[0], held[1], 1)

    def _charge(self, name: str, placement: Placement, sign: int) -> None:
        if not placement:
            return
        self.available[name] = tuple(
            tuple(a + sign * d for a, d in zip(zone, placement[z], strict=True)) if z in placement else zone
            for z, zone in enumerate(self.available[name]))
