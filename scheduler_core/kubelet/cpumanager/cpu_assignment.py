"""The kubelet static policy's CPU selection, `takeByTopology` (ENGINE.md §2.7): the accumulator and
its orderings, the packed algorithm (NUMA nodes / sockets / uncore caches / cores / threads, packed or
spread) and the distributed one (which NUMA nodes to spread over is `cpu_distributed`'s search).

Public: `take_by_topology(topology, available, count, options=None)` → `CPUSet`, dispatching to
`take_by_topology_numa_packed` or `take_by_topology_numa_distributed`; `accumulator_order(topology,
available, query)` → the accumulator's orderings (for the conformance vectors).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ...errors import InsufficientResourcesError, PolicyError, RequestError, check_int
from ...model.bitmask import bits_of as _bits
from ...model.cpuset import CPUSet
from ...model.kubelet_config import CPUOptions
from ...model.topology import Topology
from .cpu_distributed import select_numa_nodes
from .cpu_index import CPUIndex, as_mask, as_options, check_count, check_in_topology, cpu_index

PACKED = "packed"
SPREAD = "spread"
SORTING_STRATEGIES = (PACKED, SPREAD)
ACCUMULATOR_QUERIES = ("free_sockets", "free_numa_nodes", "free_cores", "free_cpus", "free_uncore_caches",
                       "sorted_sockets", "sorted_numa_nodes", "sorted_cores", "sorted_uncore_caches",
                       "spread_cpus")


# ---------------------------------------------------------------------------------------------------
# The accumulator (ENGINE.md §2.7)
# ---------------------------------------------------------------------------------------------------

def _sorted_group(avail: int, units: Iterable[tuple[int, int]], full: dict[int, int]) -> list[int]:
    """Ids of `units` (id, mask restricted to the parent) that hold an available CPU, sorted by
    (available CPUs in the whole unit, id)."""
    keyed = [((avail & full[i]).bit_count(), i) for i, part in units if avail & part]
    keyed.sort()
    return [i for _, i in keyed]


class _Accumulator:
    """State of one CPU selection: `avail` (free CPUs not yet taken), `need`, `result`."""

    __slots__ = ("_numas", "_sockets", "avail", "need", "result", "spread", "td")

    def __init__(self, td: CPUIndex, avail: int, need: int, spread: bool) -> None:
        self.td = td
        self.avail = avail & td.all
        self.need = need
        self.result = 0
        self.spread = spread
        # Orderings memoised for the free mask they were computed on.
        self._numas: tuple[int, list[int]] = (-1, [])
        self._sockets: tuple[int, list[int]] = (-1, [])

    def take(self, mask: int) -> None:
        # `need` drops by the size of what is given, even if part of it was taken before (as upstream).
        self.result |= mask
        self.avail &= ~self.result
        self.need -= mask.bit_count()

    @property
    def satisfied(self) -> bool:
        return self.need < 1

    @property
    def failed(self) -> bool:
        return self.need > self.avail.bit_count()

    # -- orderings ---------------------------------------------------------------------------------
    def sorted_numa_nodes(self) -> list[int]:
        td, a = self.td, self.avail
        if self._numas[0] == a:
            return self._numas[1]
        if td.numa_first:
            keyed = [((a & m).bit_count(), n) for n, m in td.numa_mask.items() if a & m]
            keyed.sort()
            out = [n for _, n in keyed]
        else:
            out = []
            for s in self.sorted_sockets():
                out.extend(_sorted_group(a, td.socket_numas[s], td.numa_mask))
        self._numas = (a, out)
        return out

    def sorted_sockets(self) -> list[int]:
        td, a = self.td, self.avail
        if self._sockets[0] == a:
            return self._sockets[1]
        if not td.numa_first:
            keyed = [((a & m).bit_count(), s) for s, m in td.socket_mask.items() if a & m]
            keyed.sort()
            out = [s for _, s in keyed]
        else:
            out = []
            for n in self.sorted_numa_nodes():
                out.extend(_sorted_group(a, td.numa_sockets[n], td.socket_mask))
        self._sockets = (a, out)
        return out

    def _core_parents(self) -> list[int]:
        return self.sorted_sockets() if self.td.numa_first else self.sorted_numa_nodes()

    def _cores_of(self, parent: int, frozen: int) -> list[int] | tuple[int, ...]:
        """Cores of one parent group (socket or NUMA node) with an available CPU, sorted by
        (available count, id); a fully free group of regular cores is already in id order."""
        td = self.td
        pm = td.cp_mask[parent]
        regular = td.cp_regular[parent]
        if regular is not None and frozen & pm == pm:
            return regular
        return _sorted_group(frozen, td.cp_index[parent], td.core_mask)

    def sorted_cores(self) -> list[int]:
        out: list[int] = []
        for p in self._core_parents():
            out.extend(self._cores_of(p, self.avail))
        return out

    def _iter_free_cores(self, frozen: int) -> Iterator[int]:
        # Free cores all have the same available count (CPUsPerCore), so within a parent group the
        # (count, id) order is the id order, which the index already has.
        td, per_core, cmask = self.td, self.td.cpus_per_core, self.td.core_mask
        for p in self._core_parents():
            pm = td.cp_mask[p]
            regular = td.cp_regular[p]
            if regular is not None and frozen & pm == pm:
                yield from regular
                continue
            for c, part in td.cp_index[p]:
                if frozen & part and (frozen & cmask[c]).bit_count() == per_core:
                    yield c

    def sorted_uncore_caches(self) -> list[int]:
        td, a = self.td, self.avail
        out: list[int] = []
        for n in self.sorted_numa_nodes():
            out.extend(_sorted_group(a, td.numa_uncores[n], td.uncore_mask))
        return out

    def free_numa_nodes(self) -> list[int]:
        td, a = self.td, self.avail
        return [n for n in self.sorted_numa_nodes() if (a & td.numa_mask[n]) == td.numa_mask[n]]

    def free_sockets(self) -> list[int]:
        td, a = self.td, self.avail
        return [s for s in self.sorted_sockets() if (a & td.socket_mask[s]).bit_count() == td.cpus_per_socket]

    def free_cores(self) -> list[int]:
        return list(self._iter_free_cores(self.avail))

    def free_uncore_caches(self) -> list[int]:
        td, a = self.td, self.avail
        return [u for u in self.sorted_uncore_caches() if (a & td.uncore_mask[u]) == td.uncore_mask[u]]

    def packed_cpus(self) -> list[int]:
        td, a = self.td, self.avail
        out: list[int] = []
        for c in self.sorted_cores():
            out.extend(_bits(a & td.core_mask[c]))
        return out

    def spread_cpus(self) -> list[int]:
        td, a = self.td, self.avail
        out: list[int] = []
        for s in self.sorted_sockets():
            out.extend(_bits(a & td.socket_mask[s]))
        return out

    # -- steps (ENGINE.md §2.7) -----------------------------------------------------------------------------
    def take_full_numa_nodes(self) -> None:
        td = self.td
        for n in self.free_numa_nodes():
            if self.need >= td.numa_size[n]:
                self.take(td.numa_mask[n])

    def take_full_sockets(self) -> None:
        td = self.td
        for s in self.free_sockets():
            m = td.socket_mask[s]
            if self.need >= m.bit_count():
                self.take(m)

    def take_full_cores(self) -> None:
        # The free-core list is frozen at the start, so takes never change what is walked: walk it
        # lazily over the starting mask, batch the takes, and stop once no core can fit any more.
        td = self.td
        smallest = td.min_core_size
        need = self.need
        if need < smallest:
            return
        sizes, masks = td.core_size, td.core_mask
        taken = 0
        for c in self._iter_free_cores(self.avail):
            if need < smallest:
                break
            if need >= sizes[c]:
                taken |= masks[c]
                need -= sizes[c]
        self._commit(taken, need)

    def _commit(self, taken: int, need: int) -> None:
        """Apply a batch of takes whose sizes were already subtracted into `need`."""
        self.result |= taken
        self.avail &= ~self.result
        self.need = need

    def take_remaining_cpus(self) -> None:
        # The CPU order is frozen at the start; walk it lazily and stop once satisfied. A CPU listed
        # twice (duplicated sockets) still counts twice, as upstream.
        td, frozen = self.td, self.avail
        need = self.need
        taken = 0
        if self.spread:
            groups = (frozen & td.socket_mask[s] for s in self.sorted_sockets())
        else:
            groups = (frozen & td.core_mask[c] for p in self._core_parents() for c in self._cores_of(p, frozen))
        for group in groups:
            while group:
                low = group & -group
                taken |= low
                group ^= low
                need -= 1
                if need < 1:
                    self._commit(taken, need)
                    return
        self._commit(taken, need)

    def take_full_uncore(self) -> None:
        td = self.td
        for u in self.free_uncore_caches():
            if self.need >= td.uncore_size[u]:
                self.take(td.uncore_mask[u])

    def take_partial_uncore(self, uncore: int) -> None:
        td, a = self.td, self.avail
        per_core = td.cpus_per_core or 1
        cores_needed = -(-self.need // per_core)
        cpus = 0
        picked = 0
        for c, part in td.uncore_cores.get(uncore, ()):
            if picked >= cores_needed:
                break
            if a & part:
                cpus |= a & td.core_mask[c]
                picked += 1
        if self.need % 2 != 0 and td.cpus_per_core > 1 and cpus.bit_count() > self.need:
            cpus &= ~(1 << (cpus.bit_length() - 1))
        if cpus.bit_count() == self.need:
            self.take(cpus)

    def take_uncore_cache(self) -> None:
        per_uncore = self.td.cpus_per_uncore
        for u in self.sorted_uncore_caches():
            if self.need >= per_uncore:
                self.take_full_uncore()
            if self.need < 1:
                return
            self.take_partial_uncore(u)
            if self.need < 1:
                return


def _not_enough(requested: int, available: int) -> InsufficientResourcesError:
    return InsufficientResourcesError(
        f"not enough cpus available to satisfy request: requested={requested}, available={available}")


def _packed(td: CPUIndex, avail: int, n: int, spread: bool, uncore: bool) -> int:
    """takeByTopologyNUMAPacked on masks (ENGINE.md §2.7)."""
    acc = _Accumulator(td, avail, n, spread)
    if acc.satisfied:
        return 0
    if acc.failed:
        raise _not_enough(n, avail.bit_count())
    if td.numa_first:
        acc.take_full_numa_nodes()
        if acc.satisfied:
            return acc.result
        acc.take_full_sockets()
    else:
        acc.take_full_sockets()
        if acc.satisfied:
            return acc.result
        acc.take_full_numa_nodes()
    if acc.satisfied:
        return acc.result
    if uncore:
        acc.take_uncore_cache()
        if acc.satisfied:
            return acc.result
    if not spread:
        acc.take_full_cores()
        if acc.satisfied:
            return acc.result
    acc.take_remaining_cpus()
    if acc.satisfied:
        return acc.result
    raise InsufficientResourcesError("failed to allocate cpus")


# ---------------------------------------------------------------------------------------------------
# Distributed selection (ENGINE.md §2.7)
# ---------------------------------------------------------------------------------------------------

def _distributed(td: CPUIndex, avail: int, n: int, group: int, spread: bool) -> int:
    """takeByTopologyNUMADistributed on masks, with the intended (copying) semantics and the
    group-aware remainder feasibility check; `cpu_distributed` picks the NUMA nodes."""
    if n % group != 0:
        return _packed(td, avail, n, spread, False)
    acc = _Accumulator(td, avail, n, spread)
    if acc.satisfied:
        return 0
    if acc.failed:
        raise _not_enough(n, avail.bit_count())
    numas = acc.sorted_numa_nodes()
    counts = [(acc.avail & td.numa_mask[nid]).bit_count() for nid in numas]
    choice = select_numa_nodes(counts, n, group, len(td.numa_ids), td.num_cpus)
    if choice is None:
        return _packed(td, avail, n, spread, False)
    combo = [numas[p] for p in choice[0]]
    distribution = (n // len(combo) // group) * group
    for x in combo:
        try:
            got = _packed(td, acc.avail & td.numa_mask[x], distribution, spread, False)
        except InsufficientResourcesError:
            got = 0
        acc.take(got)
    remainder = n - distribution * len(combo)
    takers = [numas[p] for p in choice[1] or ()]
    while remainder > 0:
        progressed = False
        for x in takers:
            if remainder == 0:
                break
            if (acc.avail & td.numa_mask[x]).bit_count() < group:
                continue
            try:
                got = _packed(td, acc.avail & td.numa_mask[x], group, spread, False)
            except InsufficientResourcesError:
                got = 0
            acc.take(got)
            remainder -= group
            progressed = True
        if not progressed:
            break
    if acc.need > 0:
        raise InsufficientResourcesError(f"accounting error, not enough CPUs allocated, remaining: {acc.need}")
    if acc.need < 0:
        raise InsufficientResourcesError(f"accounting error, too many CPUs allocated, remaining: {acc.need}")
    return acc.result


# ---------------------------------------------------------------------------------------------------
# Public selection API
# ---------------------------------------------------------------------------------------------------

def _strategy(strategy: str) -> bool:
    if strategy not in SORTING_STRATEGIES:
        raise PolicyError(f"unknown CPU sorting strategy {strategy!r}; expected packed or spread")
    return strategy == SPREAD


def _prepare(topology: Topology, available: CPUSet | int | Iterable[int], count: object) -> tuple[CPUIndex, int, int]:
    td = cpu_index(topology)
    mask = as_mask(available, "available CPUs")
    check_in_topology(td, mask, "the available set")
    return td, mask, check_count(count)


def take_by_topology_numa_packed(topology: Topology, available: CPUSet | int | Iterable[int], count: int,
                                 strategy: str = PACKED, prefer_align_by_uncore_cache: bool = False) -> CPUSet:
    """takeByTopologyNUMAPacked (ENGINE.md §2.7): fill the most-used NUMA node/socket/core first."""
    td, mask, n = _prepare(topology, available, count)
    return CPUSet(_packed(td, mask, n, _strategy(strategy), bool(prefer_align_by_uncore_cache)))


def take_by_topology_numa_distributed(topology: Topology, available: CPUSet | int | Iterable[int], count: int,
                                      cpu_group_size: int = 1, strategy: str = PACKED) -> CPUSet:
    """takeByTopologyNUMADistributed (ENGINE.md §2.7): spread evenly over the fewest NUMA nodes that balance best."""
    td, mask, n = _prepare(topology, available, count)
    check_int(cpu_group_size, "CPU group size", 1)
    return CPUSet(_distributed(td, mask, n, cpu_group_size, _strategy(strategy)))


def take_by_topology(topology: Topology, available: CPUSet | int | Iterable[int], count: int,
                     options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """The static policy's CPU choice (ENGINE.md §2.7): `count` CPUs out of `available`, shaped by `options`.

    Raises `InsufficientResourcesError` with the kubelet's text
    (`not enough cpus available to satisfy request: requested=N, available=M`) when they do not fit,
    and `RequestError` for a negative or non-integer count.
    """
    opts = as_options(options)
    td, mask, n = _prepare(topology, available, count)
    spread = opts.distribute_cpus_across_cores
    if opts.distribute_cpus_across_numa:
        group = (td.cpus_per_core or 1) if opts.full_pcpus_only else 1
        return CPUSet(_distributed(td, mask, n, group, spread))
    return CPUSet(_packed(td, mask, n, spread, opts.prefer_align_cpus_by_uncorecache))


def accumulator_order(topology: Topology, available: CPUSet | int | Iterable[int], query: str,
                      strategy: str = PACKED) -> list[int]:
    """An accumulator ordering over `available` (ENGINE.md §2.7): `free_sockets`, `free_numa_nodes`,
    `free_cores`, `free_cpus` (packed CPU order, or spread with strategy spread), `free_uncore_caches`,
    or the unfiltered `sorted_*` lists and `spread_cpus`."""
    td = cpu_index(topology)
    mask = as_mask(available, "available CPUs")
    check_in_topology(td, mask, "the available set")
    acc = _Accumulator(td, mask, 0, _strategy(strategy))
    if query == "free_cpus":
        return acc.spread_cpus() if acc.spread else acc.packed_cpus()
    method = {
        "free_sockets": acc.free_sockets, "free_numa_nodes": acc.free_numa_nodes, "free_cores": acc.free_cores,
        "free_uncore_caches": acc.free_uncore_caches, "sorted_sockets": acc.sorted_sockets,
        "sorted_numa_nodes": acc.sorted_numa_nodes, "sorted_cores": acc.sorted_cores,
        "sorted_uncore_caches": acc.sorted_uncore_caches, "spread_cpus": acc.spread_cpus,
    }.get(query)
    if method is None:
        raise RequestError(f"unknown accumulator query {query!r}; expected one of {', '.join(ACCUMULATOR_QUERIES)}")
    return method()
