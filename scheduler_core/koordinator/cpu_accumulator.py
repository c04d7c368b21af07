"""Koordinator's CPU accumulator (`takeCPUs`, `takePreferredCPUs`): which CPUs NodeNUMAResource gives
a container under a CPU bind policy (FullPCPUs: whole physical cores; SpreadByPCPUs: one thread per
core first), an exclusive policy (PCPULevel: no core shared with another such container;
NUMANodeLevel: no NUMA node shared) and a NUMA allocate strategy (MostAllocated packs, LeastAllocated
spreads). `max_ref_count` > 1 lets a CPU be handed out that many times (CPU sharing); the least
referenced cores and CPUs go first.

The order of the attempts and every sort key follow upstream; where upstream breaks ties by id so
does this. Go's `sort.Slice` is not stable, but on the few sockets a machine has it runs an insertion
sort, which is: Python's stable `sorted` gives the same order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: bind policies: FullPCPUs, or anything else (upstream's SpreadByPCPUs) for one thread per core first
FULL_PCPUS = "FullPCPUs"
EXCLUSIVE_NONE, PCPU_LEVEL, NUMA_NODE_LEVEL = "", "PCPULevel", "NUMANodeLevel"
#: NUMA allocate strategies: MostAllocated, or anything else (upstream's LeastAllocated)
MOST_ALLOCATED = "MostAllocated"

#: upstream's error when fewer CPUs are allocatable than needed (ErrNotEnoughCPUs)
NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
#: upstream's error when no attempt gathers enough CPUs
FAILED = "failed to allocate cpus"


class AccumulatorError(Exception):
    """The accumulator could not take the CPUs; the message is upstream's."""


@dataclass(frozen=True)
class CPUInfo:
    socket: int
    node: int
    core: int


@dataclass(frozen=True)
class Allocated:
    """What the node already handed out of one CPU: how many times, and under which exclusive policy."""

    ref_count: int = 1
    exclusive: str = EXCLUSIVE_NONE


class CPUTopology:
    """Each CPU's socket, NUMA node and core (core ids unique across the machine), and the per-core /
    per-node / per-socket CPU counts upstream derives from the totals."""

    def __init__(self, details: Mapping[int, CPUInfo]) -> None:
        self.details = dict(details)
        n = len(self.details)
        cores = {(i.socket, i.node, i.core) for i in self.details.values()}
        nodes = {(i.socket, i.node) for i in self.details.values()}
        sockets = {i.socket for i in self.details.values()}
        self.cpus_per_core = n // len(cores) if cores else 0
        self.cpus_per_node = n // len(nodes) if nodes else 0
        self.cpus_per_socket = n // len(sockets) if sockets else 0


class CPUAccumulator:
    """One `takeCPUs` call's working state: what is still allocatable (with reference counts), the cores and
    NUMA nodes taken exclusively, and the result so far."""

    def __init__(self, topo: CPUTopology, max_ref_count: int, available: Iterable[int],
                 allocated: Mapping[int, Allocated], needed: int, exclusive: str, strategy: str) -> None:
        self.topo = topo
        self.max_ref_count = max_ref_count
        self.needed = needed
        self.exclusive = exclusive
        self.most = strategy == MOST_ALLOCATED
        self.cores_taken = {topo.details[c].core for c, a in allocated.items() if a.exclusive == PCPU_LEVEL}
        self.nodes_taken = {topo.details[c].node for c, a in allocated.items() if a.exclusive == NUMA_NODE_LEVEL}
        self.ref = {c: (allocated[c].ref_count if c in allocated and max_ref_count > 1 else 0)
                    for c in available if c in topo.details}
        self.result: set[int] = set()

    # -- state ------------------------------------------------------------------------------------
    def take(self, cpus: Iterable[int]) -> None:
        for c in cpus:
            self.result.add(c)
            del self.ref[c]
            self.needed -= 1
            info = self.topo.details[c]
            if self.exclusive == PCPU_LEVEL:
                self.cores_taken.add(info.core)
            elif self.exclusive == NUMA_NODE_LEVEL:
                self.nodes_taken.add(info.node)

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def _core_excluded(self, c: int) -> bool:
        return self.exclusive == PCPU_LEVEL and self.topo.details[c].core in self.cores_taken

    def _node_excluded(self, c: int) -> bool:
        return self.exclusive == NUMA_NODE_LEVEL and self.topo.details[c].node in self.nodes_taken

    def _order(self, free: int) -> int:
        """Sort key of a free count under the strategy: MostAllocated prefers fewer free CPUs."""
        return free if self.most else -free

    def _core_ref(self, core: int) -> int:
        return sum(r for c, r in self.ref.items() if self.topo.details[c].core == core)

    def _by_ref(self, cpus: list[int]) -> list[int]:
        cpus = sorted(cpus)
        return sorted(cpus, key=lambda c: (self.ref[c], c)) if self.max_ref_count > 1 else cpus

    def _sort_cores(self, cores: list[int], cpus_in: Mapping[int, list[int]]) -> list[int]:
        def key(core: int) -> tuple[int, int, int]:
            ref = self._core_ref(core) if self.max_ref_count > 1 else 0
            return (-len(cpus_in[core]), ref, core)
        return sorted(cores, key=key)

    def _one_per_core(self, cpus: list[int]) -> list[int]:
        seen: set[int] = set()
        out = []
        for c in cpus:
            core = self.topo.details[c].core
            if core not in seen:
                seen.add(core)
                out.append(c)
        return out

    # -- candidate lists ---------------------------------------------------------------------------
    def _cores(self, filter_node_exclusive: bool) -> tuple[dict[int, list[int]], dict[int, int]]:
        """CPUs per core of what is allocatable, and the free CPU count per socket."""
        cpus_in: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for c in self.ref:
            if filter_node_exclusive and self._node_excluded(c):
                continue
            info = self.topo.details[c]
            cpus_in.setdefault(info.core, []).append(c)
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        return cpus_in, socket_free

    def free_cores_in_node(self, full_free_only: bool, filter_exclusive: bool) -> list[list[int]]:
        cpus_in, socket_free = self._cores(filter_exclusive)
        by_node: dict[int, list[int]] = {}
        for core, cpus in cpus_in.items():
            if full_free_only and len(cpus) != self.topo.cpus_per_core:
                continue
            by_node.setdefault(self.topo.details[cpus[0]].node, []).append(core)
        lists = {node: [c for core in self._sort_cores(cores, cpus_in) for c in sorted(cpus_in[core])]
                 for node, cores in by_node.items()}
        order = sorted(lists, key=lambda n: (self._order(len(lists[n])),
                                             self._order(socket_free[self.topo.details[lists[n][0]].socket]), n))
        return [lists[n] for n in order]

    def free_cores_in_socket(self, full_free_only: bool) -> list[list[int]]:
        cpus_in, _ = self._cores(False)
        by_socket: dict[int, list[int]] = {}
        for core, cpus in cpus_in.items():
            if full_free_only and len(cpus) != self.topo.cpus_per_core:
                continue
            by_socket.setdefault(self.topo.details[cpus[0]].socket, []).append(core)
        lists = {s: [c for core in self._sort_cores(cores, cpus_in) for c in sorted(cpus_in[core])]
                 for s, cores in by_socket.items()}
        return [lists[s] for s in sorted(lists, key=lambda s: (self._order(len(lists[s])), s))]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        by_node: dict[int, list[int]] = {}
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        for c in self.ref:
            if filter_exclusive and (self._core_excluded(c) or self._node_excluded(c)):
                continue
            info = self.topo.details[c]
            by_node.setdefault(info.node, []).append(c)
            node_free[info.node] = node_free.get(info.node, 0) + 1
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        lists = {}
        for node, cpus in by_node.items():
            cpus = self._by_ref(cpus)
            lists[node] = self._one_per_core(cpus) if filter_exclusive else cpus
        order = sorted(lists, key=lambda n: (self._order(node_free[n]),
                                             self._order(socket_free[self.topo.details[lists[n][0]].socket]), n))
        return [lists[n] for n in order]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        by_socket: dict[int, list[int]] = {}
        for c in self.ref:
            if filter_exclusive and self._core_excluded(c):
                continue
            by_socket.setdefault(self.topo.details[c].socket, []).append(c)
        lists = {}
        for s, cpus in by_socket.items():
            cpus = self._by_ref(cpus)
            lists[s] = self._one_per_core(cpus) if filter_exclusive else cpus
        return [lists[s] for s in sorted(lists, key=lambda s: (self._order(len(lists[s])), s))]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """Every allocatable CPU, by core: sockets already holding the result first, then the
        strategy's socket and node order, then cores with fewer free CPUs, socket, references, core."""
        cpus_in: dict[int, list[int]] = {}
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        for c in self.ref:
            if filter_exclusive and (self._core_excluded(c) or self._node_excluded(c)):
                continue
            info = self.topo.details[c]
            cpus_in.setdefault(info.core, []).append(c)
            node_free[info.node] = node_free.get(info.node, 0) + 1
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        colo = {s: sum(1 for c in self.result if self.topo.details[c].socket == s) for s in socket_free}

        def key(core: int) -> tuple[int, ...]:
            info = self.topo.details[cpus_in[core][0]]
            ref = self._core_ref(core) if self.max_ref_count > 1 else 0
            return (-colo[info.socket], self._order(socket_free[info.socket]), self._order(node_free[info.node]),
                    len(cpus_in[core]), info.socket, ref, core)

        return [c for core in sorted(cpus_in, key=key) for c in self._by_ref(cpus_in[core])]

    def spread(self, cpus: list[int]) -> list[int]:
        """One CPU of each core in turn, then the next round with what is left."""
        if len(cpus) <= self.topo.cpus_per_core:
            return cpus
        out: list[int] = []
        while cpus:
            seen: set[int] = set()
            rest = []
            for c in cpus:
                core = self.topo.details[c].core
                if core in seen:
                    rest.append(c)
                else:
                    seen.add(core)
                    out.append(c)
            cpus = rest
        return out


def take_cpus(topo: CPUTopology, max_ref_count: int, available: Iterable[int], allocated: Mapping[int, Allocated],
              needed: int, bind: str, exclusive: str, strategy: str) -> set[int]:
    """The CPUs upstream's `takeCPUs` picks; raises AccumulatorError with upstream's message."""
    acc = CPUAccumulator(topo, max_ref_count, available, allocated, needed, exclusive, strategy)
    if acc.satisfied():
        return acc.result
    if acc.needed > len(acc.ref):
        raise AccumulatorError(NOT_ENOUGH_CPUS)
    full = bind == FULL_PCPUS
    per_core = topo.cpus_per_core
    if full or per_core == 1:
        # a NUMA node, then a socket, holding enough whole free cores, in the strategy's order
        if acc.needed <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cores_in_node(True, filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(cpus[:acc.needed])
                        return acc.result
        if acc.needed <= topo.cpus_per_socket:
            for cpus in acc.free_cores_in_socket(True):
                if len(cpus) >= acc.needed:
                    acc.take(cpus[:acc.needed])
                    return acc.result
        # else whole sockets' free cores, the freest first, then cores from the least free ones
        short = []
        for cpus in sorted(acc.free_cores_in_socket(True), key=lambda cpus: -len(cpus)):
            if not acc.needs(len(cpus)):
                short.append(cpus)
            else:
                acc.take(cpus)
                if acc.satisfied():
                    return acc.result
        if acc.needs(per_core):
            for cpus in sorted(short, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i:i + per_core])
                    if acc.satisfied():
                        return acc.result
                    if not acc.needs(per_core):
                        break
    if not full:
        # one NUMA node, then one socket, with enough CPUs, spread one per core first
        if acc.needed <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[:acc.needed])
                        return acc.result
        if acc.needed <= topo.cpus_per_socket:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_socket(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[:acc.needed])
                        return acc.result
    # whatever is left, next to what was already taken
    for filter_exclusive in (True, False):
        for c in acc.spread(acc.free_cpus(filter_exclusive)):
            if acc.needs(1):
                acc.take((c,))
            if acc.satisfied():
                return acc.result
    raise AccumulatorError(FAILED)


def take_preferred_cpus(topo: CPUTopology, max_ref_count: int, available: Iterable[int], preferred: Iterable[int],
                        allocated: Mapping[int, Allocated], needed: int, bind: str, exclusive: str,
                        strategy: str) -> set[int]:
    """`takePreferredCPUs`: first as many as possible of the preferred CPUs, then the rest elsewhere."""
    available = set(available)
    preferred = available & set(preferred)
    result: set[int] = set()
    if preferred:
        result = take_cpus(topo, max_ref_count, preferred, allocated, min(needed, len(preferred)),
                           bind, exclusive, strategy)
        needed -= len(result)
        available -= preferred
    if needed > 0:
        result |= take_cpus(topo, max_ref_count, available, allocated, needed, bind, exclusive, strategy)
    return result
