"""Are a pod's DRA devices on the NUMA nodes of the CPUs and memory its kubelet pinned, and of each other?
The kubelet's Topology Manager never sees DRA devices, so nothing else aligns them (ENGINE.md §8.4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from ..model.node import Allocation
from ..model.topology import Topology
from .model import Device


class AlignmentDict(TypedDict):
    aligned: bool
    kinds: list[str]


@dataclass(frozen=True, slots=True)
class Alignment:
    """`kinds` names each pair of resources found on different NUMA nodes, "<device kind>-<other>": a device
    against the pinned CPUs (`gpu-cpu`) or memory (`nic-memory`), or two devices, the kind later in the
    alphabet first (`nic-gpu`, `gpu-gpu`). `detail` says which devices, where, and which were not checked."""

    aligned: bool
    kinds: tuple[str, ...]
    detail: str

    def to_dict(self) -> AlignmentDict:
        return {"aligned": self.aligned, "kinds": list(self.kinds)}


def pinned_numa(allocations: Sequence[Allocation], topology: Topology) -> tuple[frozenset[int], frozenset[int]]:
    """The NUMA nodes of the exclusive CPUs and of the memory a pod's allocations hold (`check`'s inputs)."""
    mask = 0
    memory: set[int] = set()
    for a in allocations:
        if a.cpus:
            mask |= topology.numa_mask_of_cpus(a.cpus)
        memory.update(n for n, res in a.memory.items() if any(res.values()))
    return frozenset(i for i in range(mask.bit_length()) if mask >> i & 1), frozenset(memory)


def _numas(nodes: frozenset[int]) -> str:
    return ",".join(str(n) for n in sorted(nodes))


def check(devices: Sequence[Device], cpu_numa: frozenset[int], memory_numa: frozenset[int]) -> Alignment:
    """The alignment of `devices` with the NUMA nodes of the pod's pinned CPUs and memory (empty: not pinned,
    nothing to check against). A device of unknown NUMA node makes no kind; `detail` names it."""
    kinds: set[str] = set()
    notes: list[str] = []
    known = [d for d in devices if d.numa is not None]
    for d in devices:
        if d.numa is None:
            notes.append(f"{d.kind} {d.driver}/{d.name}: NUMA node unknown, not checked")
    for d in known:
        assert d.numa is not None
        for other, nodes in (("cpu", cpu_numa), ("memory", memory_numa)):
            if nodes and d.numa not in nodes:
                kinds.add(f"{d.kind}-{other}")
                notes.append(f"{d.kind} {d.driver}/{d.name} on NUMA {d.numa}, {other} on NUMA {_numas(nodes)}")
    for i, a in enumerate(known):
        for b in known[i + 1:]:
            if a.numa != b.numa:
                first, second = sorted((a, b), key=lambda d: d.kind, reverse=True)
                kinds.add(f"{first.kind}-{second.kind}")
                notes.append(f"{first.kind} {first.driver}/{first.name} on NUMA {first.numa}, "
                             f"{second.kind} {second.driver}/{second.name} on NUMA {second.numa}")
    if not devices:
        notes.append("no DRA devices")
    elif not kinds:
        notes.insert(0, "devices on the NUMA nodes of the pinned CPUs and memory" if known else
                     "no device of known NUMA node")
    return Alignment(not kinds, tuple(sorted(kinds)), "; ".join(notes))
