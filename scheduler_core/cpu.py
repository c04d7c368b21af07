"""The kubelet CPU Manager, static policy (ENGINE.md §2.6): topology hints, reserved CPUs,
`allocate_cpus` and the two CPU selection algorithms behind `take_by_topology`.

Everything runs on int bitmasks (bit i = CPU i). Per-topology indexes (which cores sit in which socket,
which sockets in which NUMA node, ...) are derived once per `Topology` object and cached, so a call
only does AND/popcount work on the free mask.

Public entry points:

- `cpu_topology_hints(topology, available, reusable, request, align_by_socket=False)` → hints (ENGINE.md §2.6).
- `container_cpu_hints(...)` / `pod_cpu_hints(...)` → `None`, `{"cpu": []}` or `{"cpu": [hints]}`.
- `take_by_topology(topology, available, count, options=None)` → `CPUSet` (ENGINE.md §2.7), dispatching to
  `take_by_topology_numa_packed` (ENGINE.md §2.7) or `take_by_topology_numa_distributed` (ENGINE.md §2.7;
  which NUMA nodes it spreads over is `cpu_distributed.select_numa_nodes`).
- `accumulator_order(topology, available, query)` → the accumulator's orderings (ENGINE.md §2.7).
- `allocate_cpus(topology, n, numa_affinity, default_cpuset, reserved, reusable, options)` (ENGINE.md §2.6).
- `reserved_cpu_set(...)`, `reserved_physical_cpus(...)`, `check_smt_alignment(...)` (ENGINE.md §2.6),
  `allocate_container(...)` (Allocate for a new container), `update_cpus_to_reuse(...)` (ENGINE.md §2.5),
  `validate_static_options(topology, options)` (ENGINE.md §2.6).
- `bench_take_by_topology()` → `[(label, µs per call)]`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from itertools import combinations

from .bitmask import bits_of as _bits
from .cpu_distributed import select_numa_nodes
from .cpuset import CPUSet
from .errors import CPUSetError, EngineError, InsufficientResourcesError, PolicyError, RequestError
from .hints import TopologyHint
from .kubelet import CPUOptions
from .pods import INIT, Container, Pod, guaranteed_cpus, pod_guaranteed_cpus
from .topology import Topology

PACKED = "packed"
SPREAD = "spread"
SORTING_STRATEGIES = (PACKED, SPREAD)
ACCUMULATOR_QUERIES = ("free_sockets", "free_numa_nodes", "free_cores", "free_cpus", "free_uncore_caches",
                       "sorted_sockets", "sorted_numa_nodes", "sorted_cores", "sorted_uncore_caches",
                       "spread_cpus")


class SMTAlignmentError(EngineError):
    """`full-pcpus-only` cannot be honoured; `reason` is the kubelet's admission reason string."""

    reason = "SMTAlignmentError"


# ---------------------------------------------------------------------------------------------------
# Input coercion
# ---------------------------------------------------------------------------------------------------

def _as_mask(cpus: CPUSet | int | Iterable[int] | None, what: str = "CPU set") -> int:
    """CPUSet, int bitmask, iterable of ids or Linux list string → int bitmask."""
    if cpus is None:
        return 0
    if isinstance(cpus, CPUSet):
        return cpus.mask
    if isinstance(cpus, bool):
        raise CPUSetError(f"{what} must be a CPU set, not {cpus!r}")
    if isinstance(cpus, int):
        if cpus < 0:
            raise CPUSetError(f"{what} mask cannot be negative: {cpus}")
        return cpus
    if isinstance(cpus, str):
        return CPUSet.parse(cpus).mask
    return CPUSet(cpus).mask


def _check_in_topology(td: _TopoData, mask: int, what: str) -> None:
    extra = mask & ~td.all
    if extra:
        raise CPUSetError(f"{what} holds CPUs {CPUSet(extra)} that are not in the topology")


def _check_count(count: object, what: str = "CPU request") -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise RequestError(f"{what} must be an integer number of CPUs, not {count!r}")
    if count < 0:
        raise RequestError(f"{what} cannot be negative: {count}")
    return count


_DEFAULT_OPTIONS = CPUOptions()


def _as_options(options: CPUOptions | Mapping[str, object] | None) -> CPUOptions:
    """CPUOptions, or `{option: value}` with kubelet names (dashes; underscores are accepted too)."""
    if options is None:
        return _DEFAULT_OPTIONS
    if isinstance(options, CPUOptions):
        return options
    if not isinstance(options, Mapping):
        raise PolicyError(f"CPU Manager options must be a mapping of option names, not {options!r}")
    return CPUOptions.parse({str(k).replace("_", "-"): v for k, v in options.items()})


def _numa_mask(value: int | Iterable[int] | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise RequestError(f"NUMA affinity must be a mask or a list of NUMA ids, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise RequestError(f"NUMA affinity mask cannot be negative: {value}")
        return value
    mask = 0
    for nid in value:
        if isinstance(nid, bool) or not isinstance(nid, int) or not 0 <= nid < 64:
            raise RequestError(f"NUMA id {nid!r} in the affinity must be an integer 0..63")
        mask |= 1 << nid
    return mask


# ---------------------------------------------------------------------------------------------------
# Per-topology indexes, built once per Topology object
# ---------------------------------------------------------------------------------------------------

class _TopoData:
    """Derived int-mask indexes of one topology (the kubelet's CPUDetails queries, precomputed)."""

    __slots__ = (
        "_numa_combos",
        "align_numa_per_socket",
        "all",
        "core_cpu_ids",
        "core_mask",
        "core_size",
        "cp_index",
        "cp_mask",
        "cp_regular",
        "cpc",
        "cps",
        "cpu",
        "cpu_core",
        "cpu_numa",
        "min_core_size",
        "num_cpus",
        "numa_cores",
        "numa_first",
        "numa_ids",
        "numa_mask",
        "numa_size",
        "numa_sockets",
        "numa_sockets_mask",
        "numa_uncores",
        "socket_cores",
        "socket_ids",
        "socket_mask",
        "socket_numas",
        "uncore_cores",
        "uncore_mask",
        "uncore_size",
    )

    def __init__(self, topo: Topology) -> None:
        self.all = topo.all_cpus
        self.num_cpus = self.all.bit_count()
        self.numa_ids = tuple(topo.cpu_numa_ids)
        self.numa_mask = {n: topo.numa_cpus[n] for n in self.numa_ids}
        self.numa_size = {n: m.bit_count() for n, m in self.numa_mask.items()}
        self.socket_mask = dict(topo.socket_cpus)
        self.socket_ids = tuple(self.socket_mask)
        self.core_mask = dict(topo.core_cpus)
        self.core_size = {c: m.bit_count() for c, m in self.core_mask.items()}
        self.core_cpu_ids = {c: tuple(_bits(m)) for c, m in self.core_mask.items()}
        self.uncore_mask = dict(topo.uncore_cpus)
        self.uncore_size = {u: m.bit_count() for u, m in self.uncore_mask.items()}
        self.cpu_numa = {c.id: c.numa for c in topo.cpus}
        self.cpu_core = {c.id: c.core for c in topo.cpus}

        def pairs(outer: dict[int, int], inner: dict[int, int]) -> dict[int, tuple[tuple[int, int], ...]]:
            # outer id -> ((inner id, inner ∩ outer mask), ...) for every inner unit sharing a CPU, ascending.
            return {o: tuple((i, im & om) for i, im in inner.items() if im & om) for o, om in outer.items()}

        self.numa_sockets = pairs(self.numa_mask, self.socket_mask)
        self.socket_numas = pairs(self.socket_mask, self.numa_mask)
        self.socket_cores = pairs(self.socket_mask, self.core_mask)
        self.numa_cores = pairs(self.numa_mask, self.core_mask)
        self.numa_uncores = pairs(self.numa_mask, self.uncore_mask)
        self.uncore_cores = pairs(self.uncore_mask, self.core_mask)
        # Cores are grouped under sockets (NUMA-first) or NUMA nodes (sockets-first); a group whose cores
        # all have CPUsPerCore CPUs inside the group is "regular": when it is fully free, its cores are
        # all free and already in sort order.
        self.cp_index = self.socket_cores if topo.numa_first else self.numa_cores
        self.cp_mask = self.socket_mask if topo.numa_first else self.numa_mask
        self.cp_regular = {
            p: tuple(c for c, _ in cores)
            if all(part == self.core_mask[c] and self.core_size[c] == topo.cpus_per_core for c, part in cores)
            else None
            for p, cores in self.cp_index.items()
        }
        self.min_core_size = min(self.core_size.values())
        self._numa_combos: list | None = None
        self.numa_sockets_mask = {n: sum(1 << s for s, _ in ss) for n, ss in self.numa_sockets.items()}
        self.cpc = topo.cpus_per_core
        self.cps = topo.cpus_per_socket
        self.cpu = topo.cpus_per_uncore
        self.numa_first = topo.numa_first
        h = topo.header
        self.align_numa_per_socket = h.num_numa_nodes // h.num_sockets if h.num_sockets else 0

    def numa_combos(self) -> list[tuple[int, int, int, tuple[TopologyHint, TopologyHint]]]:
        """Every non-empty set of NUMA nodes in IterateBitMasks order, as (NUMA mask, CPU mask, size,
        (its non-preferred hint, its preferred hint)); built on first use and shared by machines with
        the same NUMA layout, so generating hints is one AND + popcount per mask."""
        if self._numa_combos is None:
            key = tuple(self.numa_mask.items())
            combos = _COMBOS.get(key)
            if combos is None:
                combos = []
                for k in range(1, len(self.numa_ids) + 1):
                    for combo in combinations(self.numa_ids, k):
                        numa = cpus = 0
                        for nid in combo:
                            numa |= 1 << nid
                            cpus |= self.numa_mask[nid]
                        combos.append((numa, cpus, k, (TopologyHint(numa, False), TopologyHint(numa, True))))
                if len(_COMBOS) >= 32:
                    _COMBOS.pop(next(iter(_COMBOS)))
                _COMBOS[key] = combos
            self._numa_combos = combos
        return self._numa_combos


_COMBOS: dict[tuple, list] = {}
_CACHE: dict[int, tuple[Topology, _TopoData]] = {}
_CACHE_MAX = 256


def _topo_data(topo: Topology) -> _TopoData:
    if not isinstance(topo, Topology):
        raise EngineError(f"expected a Topology, not {type(topo).__name__}")
    entry = _CACHE.get(id(topo))
    if entry is not None and entry[0] is topo:
        return entry[1]
    td = _TopoData(topo)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(topo)] = (topo, td)
    return td


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

    def __init__(self, td: _TopoData, avail: int, need: int, spread: bool) -> None:
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

    def _iter_free_cores(self, frozen: int):
        # Free cores all have the same available count (CPUsPerCore), so within a parent group the
        # (count, id) order is the id order, which the index already has.
        td, cpc, cmask = self.td, self.td.cpc, self.td.core_mask
        for p in self._core_parents():
            pm = td.cp_mask[p]
            regular = td.cp_regular[p]
            if regular is not None and frozen & pm == pm:
                yield from regular
                continue
            for c, part in td.cp_index[p]:
                if frozen & part and (frozen & cmask[c]).bit_count() == cpc:
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
        return [s for s in self.sorted_sockets() if (a & td.socket_mask[s]).bit_count() == td.cps]

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
        cpc = td.cpc or 1
        cores_needed = -(-self.need // cpc)
        cpus = 0
        picked = 0
        for c, part in td.uncore_cores.get(uncore, ()):
            if picked >= cores_needed:
                break
            if a & part:
                cpus |= a & td.core_mask[c]
                picked += 1
        if self.need % 2 != 0 and td.cpc > 1 and cpus.bit_count() > self.need:
            cpus &= ~(1 << (cpus.bit_length() - 1))
        if cpus.bit_count() == self.need:
            self.take(cpus)

    def take_uncore_cache(self) -> None:
        per_uncore = self.td.cpu
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


def _packed(td: _TopoData, avail: int, n: int, spread: bool, uncore: bool) -> int:
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

def _distributed(td: _TopoData, avail: int, n: int, group: int, spread: bool) -> int:
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


def _prepare(topology: Topology, available: CPUSet | int | Iterable[int], count: object) -> tuple[_TopoData, int, int]:
    td = _topo_data(topology)
    mask = _as_mask(available, "available CPUs")
    _check_in_topology(td, mask, "the available set")
    return td, mask, _check_count(count)


def take_by_topology_numa_packed(topology: Topology, available: CPUSet | int | Iterable[int], count: int,
                                 strategy: str = PACKED, prefer_align_by_uncore_cache: bool = False) -> CPUSet:
    """takeByTopologyNUMAPacked (ENGINE.md §2.7): fill the most-used NUMA node/socket/core first."""
    td, mask, n = _prepare(topology, available, count)
    return CPUSet(_packed(td, mask, n, _strategy(strategy), bool(prefer_align_by_uncore_cache)))


def take_by_topology_numa_distributed(topology: Topology, available: CPUSet | int | Iterable[int], count: int,
                                      cpu_group_size: int = 1, strategy: str = PACKED) -> CPUSet:
    """takeByTopologyNUMADistributed (ENGINE.md §2.7): spread evenly over the fewest NUMA nodes that balance best."""
    td, mask, n = _prepare(topology, available, count)
    if isinstance(cpu_group_size, bool) or not isinstance(cpu_group_size, int) or cpu_group_size < 1:
        raise RequestError(f"CPU group size must be a positive integer, not {cpu_group_size!r}")
    return CPUSet(_distributed(td, mask, n, cpu_group_size, _strategy(strategy)))


def take_by_topology(topology: Topology, available: CPUSet | int | Iterable[int], count: int,
                     options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """The static policy's CPU choice (ENGINE.md §2.7): `count` CPUs out of `available`, shaped by `options`.

    Raises `InsufficientResourcesError` with the kubelet's text
    (`not enough cpus available to satisfy request: requested=N, available=M`) when they do not fit,
    and `RequestError` for a negative or non-integer count.
    """
    opts = _as_options(options)
    td, mask, n = _prepare(topology, available, count)
    spread = opts.distribute_cpus_across_cores
    if opts.distribute_cpus_across_numa:
        group = (td.cpc or 1) if opts.full_pcpus_only else 1
        return CPUSet(_distributed(td, mask, n, group, spread))
    return CPUSet(_packed(td, mask, n, spread, opts.prefer_align_cpus_by_uncorecache))


def accumulator_order(topology: Topology, available: CPUSet | int | Iterable[int], query: str,
                      strategy: str = PACKED) -> list[int]:
    """An accumulator ordering over `available` (ENGINE.md §2.7): `free_sockets`, `free_numa_nodes`,
    `free_cores`, `free_cpus` (packed CPU order, or spread with strategy spread), `free_uncore_caches`,
    or the unfiltered `sorted_*` lists and `spread_cpus`."""
    td = _topo_data(topology)
    mask = _as_mask(available, "available CPUs")
    _check_in_topology(td, mask, "the available set")
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


# ---------------------------------------------------------------------------------------------------
# Topology hints (ENGINE.md §2.6)
# ---------------------------------------------------------------------------------------------------

def _generate_hints(td: _TopoData, available: int, reusable: int, request: int, align_by_socket: bool
                    ) -> list[TopologyHint]:
    ids = td.numa_ids
    caps = [td.numa_size[nid] for nid in ids]
    # Every reusable CPU must sit inside the mask (CPUs the topology does not know count as NUMA 0).
    reuse_numas = 0
    for cpu in _bits(reusable):
        reuse_numas |= 1 << td.cpu_numa.get(cpu, 0)
    need = request - reusable.bit_count()

    # minAffinitySize from capacity: the fewest nodes whose largest capacities reach the request.
    min_size = len(ids)
    running = 0
    for k, cap in enumerate(sorted(caps, reverse=True), start=1):
        running += cap
        if running >= request:
            min_size = min(min_size, k)
            break

    combos = td.numa_combos()
    per_socket = td.align_numa_per_socket if align_by_socket else 0
    if not per_socket:
        return [pair[size == min_size] for mask, cpus, size, pair in combos
                if not reuse_numas & ~mask and (available & cpus).bit_count() >= need]
    min_sockets = -(-min_size // per_socket)
    hints = []
    for mask, cpus, size, pair in combos:
        if reuse_numas & ~mask or (available & cpus).bit_count() < need:
            continue
        preferred = size == min_size
        if not preferred:
            sockets = 0
            for nid in _bits(mask):
                sockets |= td.numa_sockets_mask.get(nid, 0)
            preferred = sockets.bit_count() == min_sockets
        hints.append(pair[preferred])
    return hints


def cpu_topology_hints(topology: Topology, available: CPUSet | int | Iterable[int],
                       reusable: CPUSet | int | Iterable[int] | None, request: int,
                       align_by_socket: bool = False) -> list[TopologyHint]:
    """generateCPUTopologyHints: one hint per NUMA mask (IterateBitMasks order) whose available +
    reusable CPUs cover `request`; preferred when the mask is as narrow as the smallest set of NUMA
    nodes whose *capacity* fits the request (or socket-aligned with `align_by_socket`).
    Returns `[]` (never None) when nothing fits."""
    td = _topo_data(topology)
    avail = _as_mask(available, "available CPUs")
    reuse = _as_mask(reusable, "reusable CPUs")
    _check_in_topology(td, avail, "the available set")
    n = _check_count(request)
    return _generate_hints(td, avail, reuse, n, bool(align_by_socket))


def _align_by_socket(options: CPUOptions | Mapping[str, object] | bool | None) -> bool:
    if isinstance(options, bool):
        return options
    return _as_options(options).align_by_socket


def container_cpu_hints(topology: Topology, pod: Pod, container: Container,
                        default_cpuset: CPUSet | int | Iterable[int], reserved: CPUSet | int | Iterable[int] = 0,
                        assignments: Mapping[str, CPUSet] | None = None,
                        reusable: CPUSet | int | Iterable[int] | None = None,
                        options: CPUOptions | Mapping[str, object] | bool | None = None,
                        ) -> dict[str, list[TopologyHint]] | None:
    """GetTopologyHints (container scope): None when the container has no exclusive CPUs; `{"cpu": []}`
    when its existing assignment has the wrong size; else `{"cpu": hints}` over the free pool
    (`default_cpuset − reserved`) with this pod's reusable CPUs. `assignments` maps the pod's container
    names to the CPUs they already hold."""
    td = _topo_data(topology)
    req = guaranteed_cpus(pod, container)
    if req == 0:
        return None
    by_socket = _align_by_socket(options)
    existing = (assignments or {}).get(container.name)
    if existing is not None:
        held = _as_mask(existing, f"CPUs of container {container.name}")
        if held.bit_count() != req:
            return {"cpu": []}
        return {"cpu": _generate_hints(td, held, 0, req, by_socket)}
    free = _as_mask(default_cpuset, "default cpuset") & ~_as_mask(reserved, "reserved CPUs")
    return {"cpu": _generate_hints(td, free, _as_mask(reusable, "reusable CPUs"), req, by_socket)}


def pod_cpu_hints(topology: Topology, pod: Pod, default_cpuset: CPUSet | int | Iterable[int],
                  reserved: CPUSet | int | Iterable[int] = 0, assignments: Mapping[str, CPUSet] | None = None,
                  reusable: CPUSet | int | Iterable[int] | None = None,
                  options: CPUOptions | Mapping[str, object] | bool | None = None,
                  ) -> dict[str, list[TopologyHint]] | None:
    """GetPodTopologyHints (pod scope): the pod-level exclusive CPU count over the free pool, with
    CPUs already held by the pod's containers counted as reusable (ENGINE.md §2.6)."""
    td = _topo_data(topology)
    req = pod_guaranteed_cpus(pod)
    if req == 0:
        return None
    by_socket = _align_by_socket(options)
    assigned = 0
    for c in pod.all_containers():
        existing = (assignments or {}).get(c.name)
        if existing is None:
            continue
        held = _as_mask(existing, f"CPUs of container {c.name}")
        if held.bit_count() != guaranteed_cpus(pod, c):
            return {"cpu": []}
        assigned |= held
    if assigned.bit_count() == req:
        return {"cpu": _generate_hints(td, assigned, 0, req, by_socket)}
    free = _as_mask(default_cpuset, "default cpuset") & ~_as_mask(reserved, "reserved CPUs")
    reuse = _as_mask(reusable, "reusable CPUs") | assigned
    return {"cpu": _generate_hints(td, free, reuse, req, by_socket)}


# ---------------------------------------------------------------------------------------------------
# Static policy: reserved CPUs, SMT alignment, allocation (ENGINE.md §2.6)
# ---------------------------------------------------------------------------------------------------

def reserved_cpu_set(topology: Topology, reserved_cpus: CPUSet | int | Iterable[int] | None = None,
                     reserved_cpu_milli: int = 0,
                     options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """The static policy's reserved CPUs: the explicit `reservedSystemCPUs` list when given, else
    `ceil(milli/1000)` CPUs chosen by `take_by_topology` from all CPUs."""
    td = _topo_data(topology)
    explicit = _as_mask(reserved_cpus, "reserved CPUs")
    if explicit:
        _check_in_topology(td, explicit, "reservedSystemCPUs")
        return CPUSet(explicit)
    milli = _check_count(reserved_cpu_milli, "reserved CPU (millicores)")
    if milli == 0:
        raise PolicyError("[cpumanager] unable to determine reserved CPU resources for static policy")
    want = -(-milli // 1000)
    try:
        chosen = take_by_topology(topology, td.all, want, options)
    except InsufficientResourcesError:
        chosen = CPUSet()
    if len(chosen) != want:
        raise InsufficientResourcesError(
            f"[cpumanager] unable to reserve the required amount of CPUs (size of {chosen} did not equal {want})")
    return chosen


def reserved_physical_cpus(topology: Topology, reserved: CPUSet | int | Iterable[int]) -> CPUSet:
    """All hyperthread siblings of the reserved CPUs (what full-pcpus-only keeps out of reach)."""
    td = _topo_data(topology)
    mask = _as_mask(reserved, "reserved CPUs")
    out = mask
    for cpu in _bits(mask & td.all):
        out |= td.core_mask[td.cpu_core[cpu]]
    return CPUSet(out)


def check_smt_alignment(topology: Topology, n: int, default_cpuset: CPUSet | int | Iterable[int],
                        reserved: CPUSet | int | Iterable[int] = 0,
                        options: CPUOptions | Mapping[str, object] | None = None) -> None:
    """With `full-pcpus-only`, raise `SMTAlignmentError` (kubelet texts) when `n` is not a multiple of
    the CPUs per core or exceeds the free physical CPUs (`default − siblings of reserved`)."""
    opts = _as_options(options)
    n = _check_count(n)
    if not opts.full_pcpus_only or n == 0:
        return
    td = _topo_data(topology)
    cpc = td.cpc
    if cpc and n % cpc != 0:
        raise SMTAlignmentError(f"SMT Alignment Error: requested {n} cpus not multiple cpus per core = {cpc}")
    physical = _as_mask(default_cpuset, "default cpuset") & ~reserved_physical_cpus(topology, reserved).mask
    free_physical = physical.bit_count()
    if n > free_physical:
        raise SMTAlignmentError(
            f"SMT Alignment Error: not enough free physical CPUs: available physical CPUs = {free_physical}, "
            f"requested CPUs = {n}, CPUs per core = {cpc}")


def allocate_cpus(topology: Topology, n: int, numa_affinity: int | Iterable[int] | None,
                  default_cpuset: CPUSet | int | Iterable[int], reserved: CPUSet | int | Iterable[int] = 0,
                  reusable: CPUSet | int | Iterable[int] | None = None,
                  options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """allocateCPUs (ENGINE.md §2.6): first as many CPUs as fit from the hint's NUMA nodes (or their sockets with
    align-by-socket), then the rest from the remaining allocatable CPUs."""
    td = _topo_data(topology)
    opts = _as_options(options)
    n = _check_count(n)
    affinity = _numa_mask(numa_affinity)
    allocatable = ((_as_mask(default_cpuset, "default cpuset") & ~_as_mask(reserved, "reserved CPUs"))
                   | _as_mask(reusable, "reusable CPUs"))
    _check_in_topology(td, allocatable, "the allocatable set")
    result = 0
    if affinity is not None:
        region = 0
        for nid in _bits(affinity):
            region |= td.numa_mask.get(nid, 0)
        if opts.align_by_socket:
            sockets = region
            for sm in td.socket_mask.values():
                if sm & region:
                    sockets |= sm
            region = sockets
        aligned = allocatable & region
        take = min(n, aligned.bit_count())
        result = take_by_topology(topology, aligned, take, opts).mask
    rest = n - result.bit_count()
    result |= take_by_topology(topology, allocatable & ~result, rest, opts).mask
    return CPUSet(result)


def validate_static_options(topology: Topology, options: CPUOptions | Mapping[str, object] | None) -> CPUOptions:
    """The static policy's machine check of its options (ENGINE.md §2.6): align-by-socket needs at least as many
    NUMA nodes as sockets (declared header)."""
    opts = _as_options(options)
    h = topology.header
    if opts.align_by_socket and h.num_sockets > h.num_numa_nodes:
        raise PolicyError("Align by socket is not compatible with hardware where number of sockets are more than "
                          "number of NUMA")
    return opts


def allocate_container(topology: Topology, pod: Pod, container: Container, numa_affinity: int | Iterable[int] | None,
                       default_cpuset: CPUSet | int | Iterable[int], reserved: CPUSet | int | Iterable[int] = 0,
                       reusable: CPUSet | int | Iterable[int] | None = None,
                       options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """Allocate (ENGINE.md §2.6) for a container without an existing assignment: empty for
    shared-pool containers, `SMTAlignmentError` under full-pcpus-only, else `allocate_cpus` on the
    stored hint's affinity. The caller removes the result from its default cpuset."""
    n = guaranteed_cpus(pod, container)
    if n == 0:
        return CPUSet()
    opts = _as_options(options)
    check_smt_alignment(topology, n, default_cpuset, reserved, opts)
    return allocate_cpus(topology, n, numa_affinity, default_cpuset, reserved, reusable, opts)


def update_cpus_to_reuse(container: Container, cpus: CPUSet | int | Iterable[int],
                         reusable: CPUSet | int | Iterable[int] | None) -> CPUSet:
    """updateCPUsToReuse (ENGINE.md §2.5) for one pod: a regular init container's CPUs become reusable by later
    containers; an app or sidecar container's CPUs are removed from the reusable set."""
    mask = _as_mask(cpus, f"CPUs of container {container.name}")
    pool = _as_mask(reusable, "reusable CPUs")
    return CPUSet(pool | mask if container.kind == INIT else pool & ~mask)


class CPUManager:
    """The static CPU Manager of one node as a Topology Manager hint provider, beside the device and
    memory managers: the shared pool (`default_cpuset`, reserved CPUs already out of it), the CPUs
    each container of the pod being admitted holds, and the CPUs its finished init containers left
    for later containers (cpusToReuse). With a non-static policy it has no hints and pins nothing."""

    def __init__(self, topology: Topology, default_cpuset: CPUSet, reserved: CPUSet, options: CPUOptions,
                 static: bool = True) -> None:
        self.topology = topology
        self.free = default_cpuset.mask
        self.reserved = reserved
        self.options = options
        self.static = static
        self.assignments: dict[str, CPUSet] = {}
        self.reusable = CPUSet()

    @classmethod
    def for_node(cls, node) -> CPUManager:
        k = node.kubelet
        return cls(node.topology, CPUSet(node.free_cpus), node.reserved_cpus, k.cpu_manager_options, k.static_cpus)

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint]] | None:
        if not self.static:
            return None
        return container_cpu_hints(self.topology, pod, container, self.free, self.reserved, self.assignments,
                                   self.reusable, self.options)

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint]] | None:
        if not self.static:
            return None
        return pod_cpu_hints(self.topology, pod, self.free, self.reserved, self.assignments, self.reusable,
                             self.options)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> CPUSet:
        """Pin the container's exclusive CPUs with the merged hint (`SMTAlignmentError` under
        full-pcpus-only); the CPUs leave the shared pool and the reuse set is updated."""
        if not self.static:
            return CPUSet()
        cpus = allocate_container(self.topology, pod, container, hint.affinity, self.free, self.reserved,
                                  self.reusable, self.options)
        if cpus:
            self.assignments[container.name] = cpus
            self.free &= ~cpus.mask
            self.reusable = update_cpus_to_reuse(container, cpus, self.reusable)
        return cpus


# ---------------------------------------------------------------------------------------------------
# Benchmark
# ---------------------------------------------------------------------------------------------------

def bench_take_by_topology(repeat: int = 0) -> list[tuple[str, float]]:
    """µs per `take_by_topology` call on a 2-socket, 4-NUMA, 256-thread machine
    (`synthetic(2, 2, 32, 2)`), empty and partly used, for a few request sizes and options."""
    from .topology import synthetic

    topo = synthetic(2, 2, 32, 2)
    everything = topo.all_cpus
    # Partly used: every third core of NUMA 0 and 2 busy, one thread of some cores on NUMA 1, NUMA 3 half.
    busy = 0
    for core, cm in topo.core_cpus.items():
        numa = topo.cpu_info[core].numa
        if (numa in (0, 2) and core % 3 == 0) or (numa == 3 and core % 32 < 16):
            busy |= cm
        elif numa == 1 and core % 4 == 1:
            busy |= cm & -cm
    used = everything & ~busy
    cases: list[tuple[str, int, int, CPUOptions | None]] = [
        ("empty, 1 CPU", everything, 1, None),
        ("empty, 4 CPUs", everything, 4, None),
        ("empty, 16 CPUs", everything, 16, None),
        ("empty, 64 CPUs", everything, 64, None),
        ("empty, 100 CPUs", everything, 100, None),
        ("partly used, 1 CPU", used, 1, None),
        ("partly used, 6 CPUs", used, 6, None),
        ("partly used, 24 CPUs", used, 24, None),
        ("partly used, 90 CPUs", used, 90, None),
        ("partly used, 7 CPUs, uncore", used, 7, CPUOptions(prefer_align_cpus_by_uncorecache=True)),
        ("partly used, 9 CPUs, spread", used, 9, CPUOptions(distribute_cpus_across_cores=True)),
        ("partly used, 24 CPUs, distributed", used, 24, CPUOptions(distribute_cpus_across_numa=True)),
        ("partly used, 24 CPUs, distributed+full-pcpus", used, 24,
         CPUOptions(distribute_cpus_across_numa=True, full_pcpus_only=True)),
    ]
    out: list[tuple[str, float]] = []
    for label, avail, n, opts in cases:
        available_cpus = CPUSet(avail)
        take_by_topology(topo, available_cpus, n, opts)  # warm the per-topology cache
        loops = repeat or 100
        best = math.inf
        for _ in range(5):  # best of 5 rounds: the figure least disturbed by other load
            start = time.perf_counter()
            for _ in range(loops):
                take_by_topology(topo, available_cpus, n, opts)
            best = min(best, (time.perf_counter() - start) / loops)
        out.append((label, best * 1e6))
    return out


if __name__ == "__main__":  # pragma: no cover - manual benchmark
    for label, us in bench_take_by_topology():
        print(f"{label:48s} {us:9.1f} µs")
