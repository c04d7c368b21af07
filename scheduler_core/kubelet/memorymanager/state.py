"""The Memory Manager's machine state (the kubelet's `memorymanager/state/`, ENGINE.md §2.8): per NUMA
node the NUMA group it is bound to, the memory blocks using it and a `MemoryTable` per resource."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import TopologyError, check_int
from ...model.bitmask import bits_of
from ...model.topology import Topology

MEMORY = "memory"


@dataclass
class MemoryTable:
    """One resource on one NUMA node (upstream `MemoryTable`)."""

    total: int = 0
    system_reserved: int = 0
    allocatable: int = 0
    reserved: int = 0
    free: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"allocatable": self.allocatable, "free": self.free, "reserved": self.reserved,
                "system_reserved": self.system_reserved, "total": self.total}


@dataclass
class NUMANodeState:
    """A NUMA node in the memory manager's machine state."""

    cells: list[int]
    assignments: int = 0
    memory: dict[str, MemoryTable] = field(default_factory=dict)

    def table(self, resource: str) -> MemoryTable:
        """The node's table for `resource`; an empty one when the node has none of it."""
        return self.memory.get(resource) or MemoryTable()


@dataclass(frozen=True)
class Block:
    """A container's memory of one resource, spread over `numa_affinity` (ascending NUMA ids)."""

    numa_affinity: tuple[int, ...]
    type: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"numa_affinity": list(self.numa_affinity), "type": self.type, "size": self.size}


def as_bytes(value: object, what: str) -> int:
    return check_int(value, f"{what} (bytes)")


class MachineState:
    """The static policy's view of the machine: NUMA id -> `NUMANodeState` (mutable)."""

    __slots__ = ("nodes",)

    def __init__(self, nodes: Mapping[int, NUMANodeState]) -> None:
        self.nodes: dict[int, NUMANodeState] = dict(sorted(nodes.items()))

    @classmethod
    def from_topology(cls, topology: Topology, reserved: Mapping[int, Mapping[str, int]] | None = None) -> MachineState:
        """getDefaultMachineState: hugepages tables first, then memory = node memory − reserved −
        all hugepages of the node. A hugepage size present on some node exists (as 0) on all."""
        reserved = reserved or {}
        for nid, res in reserved.items():
            if nid not in topology.numa_ids:
                raise TopologyError(f"reserved memory given for NUMA node {nid}, which is not in the topology")
            for name, amount in res.items():
                as_bytes(amount, f"reserved {name} on NUMA node {nid}")
        sizes = sorted({size for n in topology.numa_nodes for size in n.hugepages})
        nodes: dict[int, NUMANodeState] = {}
        for n in topology.numa_nodes:
            state = NUMANodeState(cells=[n.id])
            node_reserved = reserved.get(n.id, {})
            hugepages_total = 0
            for size in sizes:
                total = n.hugepages.get(size, 0)
                sysres = node_reserved.get(size, 0)
                if sysres > total:
                    raise TopologyError(
                        f"reserved {size} on NUMA node {n.id} ({sysres} bytes) exceeds its {total} bytes")
                state.memory[size] = MemoryTable(total, sysres, total - sysres, 0, total - sysres)
                hugepages_total += total
            sysres = node_reserved.get(MEMORY, 0)
            allocatable = n.memory - sysres - hugepages_total
            if allocatable < 0:
                raise TopologyError(f"NUMA node {n.id}: reserved memory ({sysres} bytes) and hugepages "
                                    f"({hugepages_total} bytes) exceed its {n.memory} bytes of memory")
            state.memory[MEMORY] = MemoryTable(n.memory, sysres, allocatable, 0, allocatable)
            nodes[n.id] = state
        return cls(nodes)

    @classmethod
    def from_dict(cls, data: Mapping[Any, Any]) -> MachineState:
        """The vector format: {numa: {cells, assignments, memory: {resource: {allocatable, free,
        reserved, system_reserved, total}}}} (NUMA ids may be strings)."""
        nodes: dict[int, NUMANodeState] = {}
        try:
            for nid, node in data.items():
                tables = {res: MemoryTable(
                    as_bytes(t.get("total", 0), f"total {res} of NUMA node {nid}"),
                    as_bytes(t.get("system_reserved", 0), f"system_reserved {res} of NUMA node {nid}"),
                    as_bytes(t.get("allocatable", 0), f"allocatable {res} of NUMA node {nid}"),
                    as_bytes(t.get("reserved", 0), f"reserved {res} of NUMA node {nid}"),
                    as_bytes(t.get("free", 0), f"free {res} of NUMA node {nid}"))
                    for res, t in (node.get("memory") or {}).items()}
                nodes[int(nid)] = NUMANodeState([int(c) for c in node.get("cells", [nid])],
                                                int(node.get("assignments", 0)), tables)
        except (TypeError, ValueError, AttributeError):
            raise TopologyError(f"machine state {data!r} does not have the expected shape") from None
        return cls(nodes)

    def to_dict(self) -> dict[str, Any]:
        return {str(nid): {"cells": list(s.cells), "assignments": s.assignments,
                           "memory": {r: t.to_dict() for r, t in sorted(s.memory.items())}}
                for nid, s in self.nodes.items()}

    def copy(self) -> MachineState:
        return MachineState({nid: NUMANodeState(list(s.cells), s.assignments,
                                                {r: MemoryTable(**vars(t)) for r, t in s.memory.items()})
                             for nid, s in self.nodes.items()})

    def node(self, nid: int) -> NUMANodeState:
        try:
            return self.nodes[nid]
        except KeyError:
            raise TopologyError(f"NUMA node {nid} is not in the memory manager's machine state") from None

    def free(self, resource: str, mask: int) -> int:
        return sum(self.node(n).table(resource).free for n in bits_of(mask))

    def allocatable(self, resource: str, mask: int | None = None) -> int:
        ids = self.nodes if mask is None else bits_of(mask)
        return sum(self.node(n).table(resource).allocatable for n in ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MachineState) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"MachineState({self.to_dict()!r})"
