"""The kubelet's checkpoint files as its managers restore and write them (upstream `cpumanager/state/`
and `memorymanager/state/` checkpoints, ENGINE.md §2.10): memory_manager_state read whole into the
Memory Manager's `MachineState` and blocks, and both files written from a model's state. Reading a
cpu_manager_state, or either file as allocations, is the file format's part (`formats.kubelet_state`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TypedDict

from ..errors import FormatError
from ..formats._documents import json_object
from ..formats._values import parse_int
from ..formats.kubelet_state import go_key
from ..model.cpuset import CPUSet
from .memorymanager.state import Block, MachineState, MemoryTable, NUMANodeState

WHAT = "memory_manager_state"


class MemoryCheckpoint(TypedDict):
    """memory_manager_state as restored: the policy that wrote it, the machine state, blocks per pod
    and container."""

    policy: str
    machine_state: MachineState
    entries: dict[str, dict[str, list[Block]]]


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FormatError(f"{WHAT}: {where} must be a non-negative integer, not {value!r}")
    return value


def memory_checkpoint(text: str) -> MemoryCheckpoint:
    """memory_manager_state as the Memory Manager restores it: policy, the whole machine state
    (`cells`, `numberOfAssignments`, every table of `memoryMap`) and the blocks per pod and container."""
    data = json_object(text, WHAT)
    policy = go_key(data, "policyName")
    if not isinstance(policy, str):
        raise FormatError(f"{WHAT}: 'policyName' must be a string")
    machine = go_key(data, "machineState") or {}
    if not isinstance(machine, dict):
        raise FormatError(f"{WHAT}: 'machineState' must be an object keyed by NUMA id")
    nodes = {parse_int(key, f"{WHAT}: machineState key"): _node_state(key, state) for key, state in machine.items()}
    return {"policy": policy, "machine_state": MachineState(nodes), "entries": _entries(go_key(data, "entries") or {})}


def _node_state(key: str, state: object) -> NUMANodeState:
    if not isinstance(state, dict):
        raise FormatError(f"{WHAT}: machineState[{key!r}] must be an object")
    tables = {}
    for res, table in (state.get("memoryMap") or {}).items():
        where = f"machineState[{key!r}].memoryMap.{res}"
        if not isinstance(table, dict):
            raise FormatError(f"{WHAT}: {where} must be an object")
        tables[str(res)] = MemoryTable(*(_count(table.get(f, 0), f"{where}.{f}")
                                         for f in ("total", "systemReserved", "allocatable", "reserved", "free")))
    cells = state.get("cells") or []
    if not isinstance(cells, list):
        raise FormatError(f"{WHAT}: machineState[{key!r}].cells must be a list of NUMA ids")
    assigned = _count(state.get("numberOfAssignments", 0), f"machineState[{key!r}].numberOfAssignments")
    return NUMANodeState([_count(c, f"machineState[{key!r}].cells") for c in cells], assigned, tables)


def _entries(entries: Mapping[str, object]) -> dict[str, dict[str, list[Block]]]:
    out: dict[str, dict[str, list[Block]]] = {}
    for pod, containers in entries.items():
        if not isinstance(containers, dict):
            raise FormatError(f"{WHAT}: entries[{pod!r}] must map containers to blocks")
        for container, blocks in containers.items():
            where = f"entries[{pod!r}][{container!r}]"
            if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
                raise FormatError(f"{WHAT}: {where} must be a list of blocks")
            out.setdefault(str(pod), {})[str(container)] = [
                Block(tuple(_count(n, f"{where}[{i}].numaAffinity") for n in b.get("numaAffinity") or ()),
                      str(b.get("type")), _count(b.get("size", 0), f"{where}[{i}].size"))
                for i, b in enumerate(blocks)]
    return out


def dump_cpu_checkpoint(policy: str, default: CPUSet, assignments: Mapping[str, Mapping[str, CPUSet]]) -> str:
    """A cpu_manager_state as the kubelet writes it (v2 layout; checksum 0: not computed)."""
    entries = {pod: {c: str(cpus) for c, cpus in containers.items()} for pod, containers in assignments.items()}
    return json.dumps({"policyName": policy, "defaultCpuSet": str(default), **({"entries": entries} if entries else {}),
                       "checksum": 0})


def dump_memory_checkpoint(policy: str, machine_state: MachineState,
                           blocks: Mapping[str, Mapping[str, Sequence[Block]]]) -> str:
    """A memory_manager_state as the kubelet writes it (checksum 0: not computed)."""
    machine = {str(nid): {"numberOfAssignments": s.assignments, "cells": list(s.cells),
                          "memoryMap": {r: {"total": t.total, "systemReserved": t.system_reserved,
                                            "allocatable": t.allocatable, "reserved": t.reserved, "free": t.free}
                                        for r, t in s.memory.items()}}
               for nid, s in machine_state.nodes.items()}
    entries = {pod: {c: [{"numaAffinity": list(b.numa_affinity), "type": b.type, "size": b.size} for b in bs]
                     for c, bs in containers.items()} for pod, containers in blocks.items()}
    return json.dumps({"policyName": policy, "machineState": machine, **({"entries": entries} if entries else {}),
                       "checksum": 0})
