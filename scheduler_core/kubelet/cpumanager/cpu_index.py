"""Per-topology CPU indexes and the checks of CPU arguments against them.

`cpu_index(topology)` derives, once per `Topology` object, the int-mask indexes the kubelet's
CPUDetails queries would compute again and again (which cores sit in which socket, which sockets in
which NUMA node, CPUs per core / socket / uncore cache...), so CPU selection and hint generation only
do AND/popcount work on free masks. The `as_*` / `check_*` helpers turn the public entry points'
arguments (CPUSet, int mask, id list, Linux list string; option mappings) into masks and options once,
where they enter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from itertools import combinations

from ...errors import CPUSetError, EngineError, PolicyError, RequestError, check_int
from ...model.cpuset import CPUSet
from ...model.kubelet_config import CPUOptions
from ...model.topology import Topology
from ..topologymanager.hint import TopologyHint

#: (NUMA mask, its CPUs, its number of NUMA nodes, (its non-preferred hint, its preferred hint))
NumaCombo = tuple[int, int, int, tuple[TopologyHint, TopologyHint]]


class CPUIndex:
    """Derived int-mask indexes of one topology (the kubelet's CPUDetails queries, precomputed)."""

    __slots__ = (
        "align_numa_per_socket",
        "all",
        "core_mask",
        "core_size",
        "cp_index",
        "cp_mask",
        "cp_regular",
        "cpu_core",
        "cpu_numa",
        "cpus_per_core",
        "cpus_per_socket",
        "cpus_per_uncore",
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
        self.core_mask = dict(topo.core_cpus)
        self.core_size = {c: m.bit_count() for c, m in self.core_mask.items()}
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
        self.numa_sockets_mask = {n: sum(1 << s for s, _ in ss) for n, ss in self.numa_sockets.items()}
        self.cpus_per_core = topo.cpus_per_core
        self.cpus_per_socket = topo.cpus_per_socket
        self.cpus_per_uncore = topo.cpus_per_uncore
        self.numa_first = topo.numa_first
        h = topo.header
        self.align_numa_per_socket = h.num_numa_nodes // h.num_sockets if h.num_sockets else 0

    def numa_combos(self) -> list[NumaCombo]:
        """Every non-empty set of NUMA nodes in IterateBitMasks order, as (NUMA mask, CPU mask, size,
        (its non-preferred hint, its preferred hint)); shared by machines with the same NUMA layout,
        so generating hints is one AND + popcount per mask."""
        return _numa_combos(tuple(self.numa_mask.items()))


@lru_cache(maxsize=32)
def _numa_combos(numa_masks: tuple[tuple[int, int], ...]) -> list[NumaCombo]:
    ids = [nid for nid, _m in numa_masks]
    cpus_of = dict(numa_masks)
    combos = []
    for k in range(1, len(ids) + 1):
        for combo in combinations(ids, k):
            numa = cpus = 0
            for nid in combo:
                numa |= 1 << nid
                cpus |= cpus_of[nid]
            combos.append((numa, cpus, k, (TopologyHint(numa, False), TopologyHint(numa, True))))
    return combos


class _Same:
    """A topology keyed by identity: `Topology.__eq__` compares whole dumps, too slow for a cache key."""

    __slots__ = ("topology",)

    def __init__(self, topology: Topology) -> None:
        self.topology = topology

    def __hash__(self) -> int:
        return id(self.topology)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.topology is self.topology


@lru_cache(maxsize=256)
def _index(key: _Same) -> CPUIndex:
    return CPUIndex(key.topology)


def cpu_index(topology: Topology) -> CPUIndex:
    """The indexes of `topology`, built on first use and kept for the 256 most recent topologies."""
    if not isinstance(topology, Topology):
        raise EngineError(f"expected a Topology, not {type(topology).__name__}")
    return _index(_Same(topology))


# -- arguments of the public entry points ------------------------------------------------------------

def as_mask(cpus: CPUSet | int | Iterable[int] | None, what: str = "CPU set") -> int:
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


def check_in_topology(td: CPUIndex, mask: int, what: str) -> None:
    """Refuse CPUs the machine does not have, naming them."""
    extra = mask & ~td.all
    if extra:
        raise CPUSetError(f"{what} holds CPUs {CPUSet(extra)} that are not in the topology")


def check_count(count: object, what: str = "CPU request") -> int:
    return check_int(count, what, field="cpu")


_DEFAULT_OPTIONS = CPUOptions()


def as_options(options: CPUOptions | Mapping[str, object] | None) -> CPUOptions:
    """CPUOptions, or `{option: value}` with kubelet names (dashes; underscores are accepted too)."""
    if options is None:
        return _DEFAULT_OPTIONS
    if isinstance(options, CPUOptions):
        return options
    if not isinstance(options, Mapping):
        raise PolicyError(f"CPU Manager options must be a mapping of option names, not {options!r}")
    return CPUOptions.parse({str(k).replace("_", "-"): v for k, v in options.items()})


def numa_mask_of(value: int | Iterable[int] | None) -> int | None:
    """A NUMA affinity given as a mask or as a list of NUMA ids → mask (None stays None: any node)."""
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
