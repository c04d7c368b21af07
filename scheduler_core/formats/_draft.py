"""What an importer gathers (`Draft`, per-CPU `CPURecord`s) and the one place where it becomes a `Topology`
(core ids = smallest thread id of the core), plus an import's result (`Loaded`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EngineError, FormatError
from ..model.cpuset import MAX_CPU_ID, CPUSet
from ..model.kubelet_config import KubeletConfig
from ..model.node import Allocation
from ..model.topology import CPU, Device, NUMANode, Topology

#: Highest NUMA id the engine can hold (the kubelet's 64-bit NUMA masks).
MAX_NUMA_ID = 63


@dataclass
class CPURecord:
    """One CPU as an importer saw it: `core_key` is any hashable that is equal exactly for the
    threads of one core; `uncore` an L3 id or None (then the socket is used)."""

    id: int
    core_key: object
    socket: int
    numa: int | None
    uncore: int | None = None


@dataclass
class Draft:
    """What an importer gathered, before it becomes a Topology."""

    cpus: list[CPURecord] = field(default_factory=list)
    numa_memory: dict[int, int] = field(default_factory=dict)
    numa_hugepages: dict[int, dict[str, int]] = field(default_factory=dict)
    distances: dict[int, dict[int, int]] | None = None
    devices: list[Device] = field(default_factory=list)
    offline: int = 0
    inferred: set[str] = field(default_factory=set)
    description: str = ""
    notes: list[str] = field(default_factory=list)
    dropped_numa: list[int] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)


@dataclass
class Loaded:
    """An import's result: the topology plus what the format said beyond it."""

    format: str
    topology: Topology
    kubelet: KubeletConfig | None = None
    allocations: list[Allocation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped_numa: list[int] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def inferred(self) -> tuple[str, ...]:
        return self.topology.inferred


def build_topology(draft: Draft, what: str) -> Topology:
    """Turn a draft into a Topology: core ids become the smallest thread id of each core, NUMA ids
    above 63 (memory-only GPU nodes, for instance) are left out with a note, missing distance
    entries are filled by a documented rule (diagonal 10, else the largest known distance)."""
    if not draft.cpus:
        raise FormatError(f"{what}: no CPUs found")
    core_min = _core_ids(draft.cpus, what)
    numa_of = _cpu_numa(draft.cpus, what)
    ordered = _numa_ids(draft, numa_of, what)
    nodes = [NUMANode(n, draft.numa_memory.get(n, 0), dict(sorted(draft.numa_hugepages.get(n, {}).items())))
             for n in ordered]
    cpus = [CPU(r.id, core_min[r.core_key], r.socket, numa, r.socket if r.uncore is None else r.uncore)
            for r, numa in zip(draft.cpus, numa_of, strict=True)]
    online = CPUSet(r.id for r in draft.cpus).mask
    try:
        return Topology(cpus, nodes, _distance_rows(draft, ordered), _kept_devices(draft, set(ordered)),
                        offline_cpus=CPUSet(draft.offline & ~online), inferred=draft.inferred,
                        description=draft.description)
    except EngineError as exc:
        raise FormatError(f"{what}: {exc}") from None


def _core_ids(records: list[CPURecord], what: str) -> dict[object, int]:
    """Each core's engine id, the smallest thread id of its `core_key`; a CPU listed twice or out of
    range is refused."""
    seen: set[int] = set()
    core_min: dict[object, int] = {}
    for rec in records:
        if rec.id in seen:
            raise FormatError(f"{what}: CPU {rec.id} is listed twice")
        if rec.id > MAX_CPU_ID or rec.id < 0:
            raise FormatError(f"{what}: CPU id {rec.id} is out of range 0-{MAX_CPU_ID}")
        seen.add(rec.id)
        prev = core_min.get(rec.core_key)
        if prev is None or rec.id < prev:
            core_min[rec.core_key] = rec.id
    return core_min


def _cpu_numa(records: list[CPURecord], what: str) -> list[int]:
    """The NUMA node of each record, in order: every CPU must have one the kubelet's masks can hold."""
    numa_of: list[int] = []
    for rec in records:
        if rec.numa is None:
            raise FormatError(f"{what}: CPU {rec.id} has no NUMA node")
        numa_of.append(rec.numa)
    high = next((r.id for r, n in zip(records, numa_of, strict=True) if n > MAX_NUMA_ID), None)
    if high is not None:
        raise FormatError(f"{what}: CPU {high} is on NUMA node above {MAX_NUMA_ID}; the kubelet's "
                          "NUMA masks cannot hold it")
    return numa_of


def _numa_ids(draft: Draft, numa_of: list[int], what: str) -> list[int]:
    """The topology's NUMA ids, sorted: those of CPUs, memory, hugepages and distances; memory-only
    nodes above MAX_NUMA_ID are left out with a note."""
    numa_ids = set(draft.numa_memory) | set(draft.numa_hugepages) | set(numa_of)
    if draft.distances:
        numa_ids |= set(draft.distances)
    too_high = sorted(n for n in numa_ids if n > MAX_NUMA_ID)
    if too_high:
        draft.dropped_numa.extend(too_high)
        draft.notes.append(f"memory-only NUMA nodes {too_high} left out: ids above {MAX_NUMA_ID} do not fit "
                           "the kubelet's NUMA masks")
        numa_ids -= set(too_high)
    return sorted(numa_ids)


def _distance_rows(draft: Draft, ordered: list[int]) -> dict[int, list[int]] | None:
    """The distance matrix over `ordered`, a missing entry filled (10 on the diagonal, else the
    largest known distance) and `distances` flagged inferred then; None when the draft has none."""
    if not draft.distances:
        return None
    known = [v for row in draft.distances.values() for v in row.values()]
    far = max(known) if known else 20
    distances: dict[int, list[int]] = {}
    filled = False
    for a in ordered:
        row = []
        for b in ordered:
            v = draft.distances.get(a, {}).get(b)
            if v is None:
                filled = True
                v = 10 if a == b else far
            row.append(v)
        distances[a] = row
    if filled:
        draft.inferred.add("distances")
    return distances


def _kept_devices(draft: Draft, kept: set[int]) -> list[Device]:
    """The draft's devices, NUMA nodes left out of the topology dropped from their locality (noted)."""
    devices = []
    for d in draft.devices:
        if d.numa is not None and any(n not in kept for n in d.numa):
            numa = tuple(n for n in d.numa if n in kept)
            draft.notes.append(f"device {d.id}: NUMA nodes outside the topology dropped from its locality")
            d = Device(d.id, d.resource, numa, d.healthy, d.name)
        devices.append(d)
    return devices
