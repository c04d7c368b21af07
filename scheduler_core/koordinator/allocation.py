"""NodeNUMAResource's resource manager: what one node publishes (its CPU topology and NUMA zones),
what the scheduler has handed out there (CPUs with reference counts and exclusivity, NUMA
amounts, which NUMA nodes hold single-NUMA or multi-NUMA pods), and how a pod's CPUs and NUMA
amounts are chosen for a NUMA affinity (tryBestToDistributeEvenly, allocateCPUSet) and which
affinities are possible at all (generateResourceHints).

Amounts are ints: cpu in millicores, memory and hugepages in bytes, devices as counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model.bitmask import bits_of, iterate_masks
from .cpu_accumulator import (
    EXCLUSIVE_NONE,
    FULL_PCPUS,
    NOT_ENOUGH_CPUS,
    AccumulatorError,
    Allocated,
    CPUTopology,
    take_preferred_cpus,
)
from .hints import IDLE, RESTRICTED, SHARED, SINGLE, Hint

SPREAD_BY_PCPUS = "SpreadByPCPUs"
#: upstream's error when a required bind policy cannot be met by the CPUs taken
BIND_UNSATISFIED = "insufficient CPUs to satisfy required cpu bind policy {}"
#: the NUMA scorer's default resource weights (NodeNUMAResourceArgs defaults)
DEFAULT_WEIGHTS: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
MAX_NODE_SCORE = 100

Resources = Mapping[str, int]


@dataclass(frozen=True)
class NodeOptions:
    """TopologyOptions and the labels the plugin reads: the CPU topology (None or empty: invalid),
    reserved CPUs, the NUMA zones' allocatable amounts, the node's NUMA topology policy and CPU bind
    policy (label, else the kubelet's), and its NUMA allocate strategy."""

    cpu_topology: CPUTopology | None
    numa_resources: Mapping[int, Resources]
    numa_policy: str = ""
    cpu_bind_policy: str = "None"
    reserved: frozenset[int] = frozenset()
    max_ref_count: int = 1
    strategy: str = ""

    @property
    def valid(self) -> bool:
        t = self.cpu_topology
        return t is not None and bool(t.details) and t.cpus_per_core > 0

    @property
    def numa_nodes(self) -> list[int]:
        return sorted(self.numa_resources)


@dataclass(frozen=True)
class PodAllocation:
    uid: str
    cpus: frozenset[int] = frozenset()
    exclusive: str = EXCLUSIVE_NONE
    numa: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()


@dataclass
class NodeAllocation:
    """What the scheduler handed out on one node (NodeAllocation)."""

    pods: dict[str, PodAllocation] = field(default_factory=dict)
    cpus: dict[int, Allocated] = field(default_factory=dict)
    numa: dict[int, dict[str, int]] = field(default_factory=dict)
    shared: dict[int, set[str]] = field(default_factory=dict)
    single: dict[int, set[str]] = field(default_factory=dict)

    def status(self, n: int) -> list[str]:
        """GetAllNUMANodeStatus for NUMA ids 0..n-1."""
        out = []
        for i in range(n):
            single, shared = self.single.get(i), self.shared.get(i)
            out.append(IDLE if not single and not shared else SINGLE if not shared else SHARED)
        return out

    def add(self, alloc: PodAllocation, topo: CPUTopology | None) -> None:
        if alloc.uid in self.pods:
            return
        self.pods[alloc.uid] = alloc
        used = set()
        for c in alloc.cpus:
            held = self.cpus.get(c)
            self.cpus[c] = Allocated((held.ref_count if held else 0) + 1, alloc.exclusive)
            if topo is not None:
                used.add(topo.details[c].node)
        target = self.shared if len(used) > 1 else self.single
        for n in used:
            target.setdefault(n, set()).add(alloc.uid)
        for n, res in alloc.numa:
            have = self.numa.setdefault(n, {})
            for r, v in res:
                have[r] = have.get(r, 0) + v

    def release(self, uid: str, topo: CPUTopology | None) -> None:
        alloc = self.pods.pop(uid, None)
        if alloc is None:
            return
        for c in alloc.cpus:
            held = self.cpus[c]
            if held.ref_count <= 1:
                del self.cpus[c]
            else:
                self.cpus[c] = Allocated(held.ref_count - 1, held.exclusive)
            if topo is not None:
                n = topo.details[c].node
                self.shared.get(n, set()).discard(uid)
                self.single.get(n, set()).discard(uid)
        for n, res in alloc.numa:
            have = self.numa[n]
            for r, v in res:
                have[r] = max(0, have.get(r, 0) - v)

    def available_cpus(self, opts: NodeOptions) -> set[int]:
        """getAvailableCPUs: every CPU not held max_ref_count times and not reserved."""
        assert opts.cpu_topology is not None
        full = {c for c, a in self.cpus.items() if a.ref_count >= opts.max_ref_count}
        return set(opts.cpu_topology.details) - full - opts.reserved

    def available_numa(self, opts: NodeOptions) -> dict[int, dict[str, int]]:
        """getAvailableNUMANodeResources: each zone's allocatable minus what was handed out there."""
        out = {}
        for n, res in opts.numa_resources.items():
            used = self.numa.get(n, {})
            out[n] = {r: max(0, v - used.get(r, 0)) for r, v in res.items()}
        return out


@dataclass(frozen=True)
class Request:
    """ResourceOptions: the pod's requests and how its CPUs are bound on this node."""

    requests: tuple[tuple[str, int], ...]
    num_cpus: int = 0
    cpu_bind: bool = False
    required: bool = False
    bind_policy: str = ""
    exclusive: str = EXCLUSIVE_NONE


def filter_by_bind_policy(policy: str, available: set[int], topo: CPUTopology) -> set[int]:
    """filterCPUsByRequiredCPUBindPolicy: FullPCPUs keeps whole free cores, SpreadByPCPUs one CPU per core."""
    cores: dict[int, list[int]] = {}
    for c in available:
        cores.setdefault(topo.details[c].core, []).append(c)
    if policy == FULL_PCPUS:
        return {c for cpus in cores.values() if len(cpus) == topo.cpus_per_core for c in cpus}
    if policy == SPREAD_BY_PCPUS:
        return {min(cpus) for cpus in cores.values()}
    return available


def _trim(opts: NodeOptions, alloc: NodeAllocation, avail: dict[int, dict[str, int]], req: Request) -> None:
    """trimNUMANodeResources: under a required bind policy a zone offers only the CPUs the policy can use."""
    if not req.required:
        return
    topo = opts.cpu_topology
    assert topo is not None
    usable = filter_by_bind_policy(req.bind_policy, alloc.available_cpus(opts), topo)
    for n, res in avail.items():
        cpu = res.get("cpu", 0)
        if cpu:
            fit = sum(1 for c in usable if topo.details[c].node == n) * 1000
            if fit < cpu:
                res["cpu"] = fit


def _go_insertion_order(nodes: list[int], value: Mapping[int, int]) -> list[int]:
    """What Go's sort.Slice does to `nodes` (< 12 items: insertion sort) with upstream's comparator,
    which compares the zones whose ids are the *positions* being compared, not the elements."""
    out = list(nodes)
    for i in range(1, len(out)):
        j = i
        while j > 0 and value.get(j, 0) < value.get(j - 1, 0):
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


def _split(resource: str, quantity: int, count: int, req: Request, topo: CPUTopology | None) -> int:
    if resource != "cpu":
        return quantity // count
    if not req.cpu_bind:
        return quantity // count
    cores = -(-quantity // 1000)  # Quantity.Value() rounds up
    if req.required and req.bind_policy == FULL_PCPUS and topo is not None:
        per_core = topo.cpus_per_core
        return (cores // per_core // count) * per_core * 1000
    return (cores // count) * 1000


def distribute(req: Request, avail: Mapping[int, Mapping[str, int]], mask: int,
               topo: CPUTopology | None) -> tuple[dict[int, dict[str, int]], list[str]]:
    """tryBestToDistributeEvenly: each requested resource split over the affinity's zones."""
    names = {r for res in avail.values() for r in res}
    nodes = bits_of(mask)
    result: dict[int, dict[str, int]] = {}
    reasons = []
    for resource, quantity in req.requests:
        order = _go_insertion_order(nodes, {n: res.get(resource, 0) for n, res in avail.items()}) \
            if resource in names else []
        for i, n in enumerate(order):
            share = _split(resource, quantity, len(nodes) - i, req, topo)
            took = min(avail.get(n, {}).get(resource, 0), share)
            if took:
                result.setdefault(n, {})[resource] = took
                quantity -= took
        if resource in names and quantity:
            reasons.append(f"Insufficient NUMA {resource}")
    return result, sorted(reasons)


class AllocateError(Exception):
    """The pod cannot be allocated under this affinity; the message is upstream's status message."""


def allocate_cpus(opts: NodeOptions, alloc: NodeAllocation, req: Request,
                  numa: Mapping[int, Mapping[str, int]], strategy: str) -> frozenset[int]:
    """allocateCPUSet: each zone's share of CPUs from that zone, the rest anywhere, by the accumulator."""
    topo = opts.cpu_topology
    assert topo is not None
    available = alloc.available_cpus(opts)
    if req.required:
        available = filter_by_bind_policy(req.bind_policy, available, topo)
    if len(available) < req.num_cpus:
        raise AllocateError(NOT_ENOUGH_CPUS)
    result: set[int] = set()
    needed = req.num_cpus
    try:
        if numa:
            for n in sorted(numa):
                here = {c for c in available if topo.details[c].node == n}
                want = min(len(here), numa[n].get("cpu", 0) // 1000)
                result |= take_preferred_cpus(topo, opts.max_ref_count, here, (), alloc.cpus, want,
                                              req.bind_policy, req.exclusive, strategy)
            needed -= len(result)
            if needed:
                raise AllocateError(NOT_ENOUGH_CPUS)
        if needed > 0:
            result |= take_preferred_cpus(topo, opts.max_ref_count, available - result, (), alloc.cpus, needed,
                                          req.bind_policy, req.exclusive, strategy)
    except AccumulatorError as e:
        raise AllocateError(str(e)) from None
    if req.required:
        cores = {topo.details[c].core for c in result}
        ok = len(cores) * topo.cpus_per_core == len(result) if req.bind_policy == FULL_PCPUS else \
            len(cores) == len(result) if req.bind_policy == SPREAD_BY_PCPUS else True
        if not ok:
            raise AllocateError(BIND_UNSATISFIED.format(req.bind_policy))
    return frozenset(result)


def allocate(opts: NodeOptions, alloc: NodeAllocation, req: Request, uid: str, hint: int | None,
             strategy: str) -> PodAllocation:
    """resourceManager.Allocate: NUMA amounts for the affinity (if any), then the CPU set (if bound)."""
    numa: dict[int, dict[str, int]] = {}
    if hint is not None:
        if not opts.numa_resources:
            raise AllocateError("insufficient resources on NUMA Node")
        avail = alloc.available_numa(opts)
        _trim(opts, alloc, avail, req)
        numa, reasons = distribute(req, avail, hint, opts.cpu_topology)
        if reasons:
            raise AllocateError(", ".join(reasons))
    cpus: frozenset[int] = frozenset()
    if req.cpu_bind:
        cpus = allocate_cpus(opts, alloc, req, numa, strategy)
    return PodAllocation(uid, cpus, req.exclusive,
                         tuple((n, tuple(sorted(res.items()))) for n, res in sorted(numa.items())))


def least_allocated(requested: Resources, total: Resources, pod: Resources,
                    weights: tuple[tuple[str, int], ...] = DEFAULT_WEIGHTS, most: bool = False) -> int:
    """resourceAllocationScorer.score with the Least/MostAllocated scorer: the weighted mean over the
    weighted resources the capacity has of (free after the pod / capacity) × 100 (or used, for Most)."""
    score = weight_sum = 0
    for r, w in weights:
        cap = total.get(r, 0)
        if not cap:
            continue
        used = requested.get(r, 0) + pod.get(r, 0)
        if most:
            score += min(used, cap) * MAX_NODE_SCORE // cap * w
        else:
            score += (0 if used > cap else (cap - used) * MAX_NODE_SCORE // cap) * w
        weight_sum += w
    return score // weight_sum if weight_sum else 0


def topology_hints(opts: NodeOptions, alloc: NodeAllocation, req: Request, uid: str, policy: str,
                   strategy: str, most: bool = False) -> dict[str, list[Hint]]:
    """generateResourceHints: every NUMA affinity under which the pod can be allocated, per requested
    resource the zones report, scored by the NUMA scorer; preferred = narrowest (any under Restricted)."""
    avail = alloc.available_numa(opts)
    _trim(opts, alloc, avail, req)
    names = {r for res in opts.numa_resources.values() for r in res}
    lacking = {r: {n for n, res in avail.items() if not res.get(r, 0)} for r in names}
    pod = dict(req.requests)
    nodes = opts.numa_nodes
    min_size = {r: len(nodes) for r, _q in req.requests}
    hints: dict[str, list[Hint]] = {}
    reported: set[str] = set()
    for mask in iterate_masks(nodes):
        members = bits_of(mask)
        total: dict[str, int] = {}
        free: dict[str, int] = {}
        for n in members:
            for r, v in opts.numa_resources[n].items():
                total[r] = total.get(r, 0) + v
            for r, v in avail[n].items():
                free[r] = free.get(r, 0) + v
        reported |= {r for r, _q in req.requests if r in total}
        requested = {r: max(0, v - free.get(r, 0)) for r, v in total.items()}
        score = least_allocated(requested, total, pod, most=most)
        try:
            allocate(opts, alloc, req, uid, mask, strategy)
        except AllocateError:
            continue
        if any(n in lacking.get(r, ()) for r in reported for n in members):
            continue
        for r in reported:
            min_size[r] = min(min_size[r], len(members))
            hints.setdefault(r, []).append(Hint(mask, False, False, score))
    out: dict[str, list[Hint]] = {}
    for r, _q in req.requests:
        if r in reported:
            out[r] = [Hint(h.mask, h.mask is not None and (h.mask.bit_count() == min_size[r] or policy == RESTRICTED),
                           False, h.score) for h in hints.get(r, [])]
    return out

