"""The Memory Manager static policy's start (the state helpers of the kubelet's `policy_static.go`, ENGINE.md
§2.10): NewPolicyStatic's reserved-memory check, the default machine state of a configuration and Start's
validateState, which replays the checkpoint's blocks on it and compares the result with the stored state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...model.topology import Topology
from .policy_static import MemoryAllocationError
from .state import MEMORY, Block, MachineState, MemoryTable, NUMANodeState


def check_system_reserved(reserved: Mapping[int, Mapping[str, int]] | None) -> None:
    """NewPolicyStatic: the static policy refuses to run without reserved memory on some NUMA node."""
    if sum((res or {}).get(MEMORY, 0) for res in (reserved or {}).values()) <= 0:
        raise MemoryAllocationError("[memorymanager] you should specify the system reserved memory")


def default_machine_state(machine: Mapping[int, tuple[int, Mapping[str, int]]],
                          reserved: Mapping[int, Mapping[str, int]] | None = None) -> MachineState:
    """getDefaultMachineState for `machine` = {NUMA id: (memory bytes, {hugepages-<size>: bytes})}, each
    node with exactly the hugepage sizes it lists: allocatable = total − reserved, and memory also
    loses the node's hugepages."""
    reserved = reserved or {}
    nodes: dict[int, NUMANodeState] = {}
    for nid, (memory, hugepages) in machine.items():
        node_reserved = reserved.get(nid, {})
        state = NUMANodeState(cells=[nid])
        for size, total in hugepages.items():
            sysres = node_reserved.get(size, 0)
            state.memory[size] = MemoryTable(total, sysres, total - sysres, 0, total - sysres)
        sysres = node_reserved.get(MEMORY, 0)
        allocatable = memory - sysres - sum(hugepages.values())
        state.memory[MEMORY] = MemoryTable(memory, sysres, allocatable, 0, allocatable)
        nodes[nid] = state
    return MachineState(nodes)


def machine_of(topology: Topology) -> dict[int, tuple[int, dict[str, int]]]:
    """What cadvisor reports per NUMA node: its memory and every hugepage size the machine has."""
    sizes = sorted({size for n in topology.numa_nodes for size in n.hugepages})
    return {n.id: (n.memory, {s: n.hugepages.get(s, 0) for s in sizes}) for n in topology.numa_nodes}


def replay_blocks(state: MachineState, assignments: Mapping[str, Mapping[str, Iterable[Block]]]) -> MachineState:
    """Carve every block of `assignments` out of `state` (in place) the way validateState does: node by
    node in the block's order, each node of a block counted and bound to the block's group. Raises
    `MemoryAllocationError` (kubelet texts) for a NUMA node or a resource the state does not have."""
    for pod, containers in assignments.items():
        for name, blocks in containers.items():
            for b in blocks:
                remaining = b.size
                for nid in b.numa_affinity:
                    node = state.nodes.get(nid)
                    if node is None:
                        raise MemoryAllocationError(f"[memorymanager] (pod: {pod}, container: {name}) the memory "
                                                    "assignment uses the NUMA that does not exist")
                    node.assignments += 1
                    node.cells = list(b.numa_affinity)
                    table = node.memory.get(b.type)
                    if table is None:
                        raise MemoryAllocationError(f"[memorymanager] (pod: {pod}, container: {name}) the memory "
                                                    "assignment uses memory resource that does not exist")
                    if remaining == 0 or table.free <= 0:
                        continue
                    step = min(table.free, remaining)
                    table.free -= step
                    table.reserved += step
                    remaining -= step
    return state


def validate_state(stored: MachineState, assignments: Mapping[str, Mapping[str, Iterable[Block]]],
                   expected: MachineState) -> MachineState:
    """Start's validateState: replay every block of `assignments` on `expected` (the default machine
    state of the configuration) and require the stored state to equal it. An empty stored state is a
    fresh start. Raises `MemoryAllocationError` with the kubelet's texts; returns the state kept."""
    if not stored.nodes:
        if any(assignments.values()):
            raise MemoryAllocationError("[memorymanager] machine state can not be empty when it has memory "
                                        "assignments")
        return expected
    replay_blocks(expected, assignments)
    if not _states_equal(stored, expected):
        raise MemoryAllocationError("[memorymanager] the expected machine state is different from the real one")
    return stored


def _states_equal(a: MachineState, b: MachineState) -> bool:
    """areMachineStatesEqual: per node the assignment count, group and each table's total, reserved
    by the system and allocatable; free and reserved only as sums over the node's group (a block
    spread over several nodes may be carved in another order)."""
    if a.nodes.keys() != b.nodes.keys():
        return False
    for nid, na in a.nodes.items():
        nb = b.nodes[nid]
        if na.assignments != nb.assignments or sorted(na.cells) != sorted(nb.cells):
            return False
        if na.memory.keys() != nb.memory.keys():
            return False
        for res, ta in na.memory.items():
            tb = nb.memory[res]
            if (ta.total, ta.system_reserved, ta.allocatable) != (tb.total, tb.system_reserved, tb.allocatable):
                return False
            sums = []
            for state in (a, b):
                tables = [state.nodes[c].table(res) if c in state.nodes else MemoryTable() for c in na.cells]
                sums.append((sum(t.free for t in tables), sum(t.reserved for t in tables)))
            if sums[0] != sums[1]:
                return False
    return True
