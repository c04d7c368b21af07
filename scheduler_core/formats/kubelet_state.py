"""The kubelet's checkpoint files: the real pinning on a node, for comparison with predictions.

`cpu_manager_state`: `{"policyName", "defaultCpuSet" (or "defaultCPUSet": Go matches JSON keys
case-insensitively), "entries", "checksum"}`. `entries` may be absent; the v2 layout maps pod UID →
container name → cpuset, the v1 layout container ID → cpuset (pod unknown: the allocation's pod is
`container:<id>`). The checksum is recorded, not verified (it hashes Go's in-memory dump).

`memory_manager_state`: `machineState` keyed by NUMA id strings and `entries` pod UID → container →
[{numaAffinity, type, size}]. A block spread over several NUMA nodes is split evenly across them
(the remainder on the lowest node), since the file records only the total.

`device-plugins/kubelet_internal_checkpoint` (the Device Manager's): `Data.PodDeviceEntries`, each
{PodUID, ContainerName, ResourceName, DeviceIDs} where DeviceIDs maps a NUMA id (string, "-1" for
none) to device ids (older kubelets: a plain list), and `Data.RegisteredDevices` resource → ids.

As a topology (`load_as_topology`), only the CPU ids (`defaultCpuSet` ∪ assigned) or the NUMA
node sizes are known: one NUMA node, one socket, one core per CPU, all flagged inferred.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ..errors import EngineError, FormatError
from ..model.cpuset import CPUSet
from ..model.node import IMPORTED, Allocation
from ._documents import json_object
from ._draft import CPURecord, Draft, Loaded, build_topology
from ._values import parse_int


class CPUState(TypedDict):
    """A parsed cpu_manager_state; `entries` maps (pod, container) to its CPUs."""

    policy: str
    default: CPUSet
    entries: dict[tuple[str, str], CPUSet]
    checksum: int | None
    layout: str


class MemoryState(TypedDict):
    """A parsed memory_manager_state, as allocations: NUMA sizes and memory per (pod, container)."""

    policy: object
    nodes: dict[int, dict[str, int]]
    entries: dict[tuple[str, str], dict[int, dict[str, int]]]
    checksum: object


def go_key(data: dict[str, Any], key: str) -> Any:
    """Go's case-insensitive JSON key match."""
    for k, v in data.items():
        if k.lower() == key.lower():
            return v
    return None


def _cpus(text: object, what: str) -> CPUSet:
    if not isinstance(text, str):
        raise FormatError(f"{what} must be a cpuset string, not {text!r}")
    try:
        return CPUSet.parse(text)
    except EngineError as exc:
        raise FormatError(f"{what}: {exc}") from None


def cpu_state(text: str) -> CPUState:
    """Parsed cpu_manager_state: policy, default cpuset, checksum, {(pod, container): CPUSet}."""
    what = "cpu_manager_state"
    data = json_object(text, what)
    policy = go_key(data, "policyName")
    if not isinstance(policy, str):
        raise FormatError(f"{what}: 'policyName' must be a string")
    default = _cpus(go_key(data, "defaultCpuSet") or "", f"{what}: defaultCpuSet")
    entries = go_key(data, "entries") or {}
    if not isinstance(entries, dict):
        raise FormatError(f"{what}: 'entries' must be an object")
    assigned: dict[tuple[str, str], CPUSet] = {}
    layout = "none"
    for key, value in entries.items():
        if isinstance(value, dict):
            layout = "v2"
            for container, cpus in value.items():
                assigned[(str(key), str(container))] = _cpus(cpus, f"{what}: entries[{key!r}][{container!r}]")
        else:
            layout = "v1"
            assigned[(f"container:{key}", str(key))] = _cpus(value, f"{what}: entries[{key!r}]")
    checksum = go_key(data, "checksum")
    if checksum is not None and (isinstance(checksum, bool) or not isinstance(checksum, int)):
        raise FormatError(f"{what}: 'checksum' must be an integer")
    return {"policy": policy, "default": default, "entries": assigned, "checksum": checksum, "layout": layout}


def memory_state(text: str) -> MemoryState:
    what = "memory_manager_state"
    data = json_object(text, what)
    policy = go_key(data, "policyName")
    machine = go_key(data, "machineState") or {}
    if not isinstance(machine, dict):
        raise FormatError(f"{what}: 'machineState' must be an object keyed by NUMA id")
    nodes: dict[int, dict[str, int]] = {}
    for key, state in machine.items():
        nid = parse_int(key, f"{what}: machineState key")
        memory_map = (state or {}).get("memoryMap") or {}
        nodes[nid] = {}
        for res, table in memory_map.items():
            total = (table or {}).get("total", 0)
            if isinstance(total, bool) or not isinstance(total, int) or total < 0:
                raise FormatError(f"{what}: machineState[{key!r}].memoryMap.{res}.total must be a byte count")
            nodes[nid][str(res)] = total
    entries: dict[tuple[str, str], dict[int, dict[str, int]]] = {}
    for pod, containers in (go_key(data, "entries") or {}).items():
        if not isinstance(containers, dict):
            raise FormatError(f"{what}: entries[{pod!r}] must map containers to blocks")
        for container, blocks in containers.items():
            where = f"{what}: entries[{pod!r}][{container!r}]"
            if not isinstance(blocks, list):
                raise FormatError(f"{where} must be a list of blocks")
            memory: dict[int, dict[str, int]] = {}
            for i, block in enumerate(blocks):
                if not isinstance(block, dict):
                    raise FormatError(f"{where}[{i}] must be an object")
                affinity = block.get("numaAffinity") or []
                size = block.get("size", 0)
                res = block.get("type")
                if not affinity or not isinstance(res, str) or isinstance(size, bool) or not isinstance(size, int) \
                        or size < 0 or not all(isinstance(n, int) and n >= 0 for n in affinity):
                    raise FormatError(f"{where}[{i}] needs numaAffinity (NUMA ids), type and a byte size")
                nodes_sorted = sorted(set(affinity))
                share, rest = divmod(size, len(nodes_sorted))
                for j, nid in enumerate(nodes_sorted):
                    amount = share + (rest if j == 0 else 0)
                    memory.setdefault(nid, {})[res] = memory.get(nid, {}).get(res, 0) + amount
            entries[(str(pod), str(container))] = memory
    return {"policy": policy, "nodes": nodes, "entries": entries, "checksum": go_key(data, "checksum")}


class DeviceState(TypedDict):
    """A parsed Device Manager checkpoint: devices per (pod, container) and resource, the NUMA node the
    checkpoint gives each allocated device, and the devices registered per resource."""

    entries: dict[tuple[str, str], dict[str, list[str]]]
    numa: dict[str, int]
    registered: dict[str, list[str]]


def device_state(text: str) -> DeviceState:
    what = "kubelet_internal_checkpoint"
    data = go_key(json_object(text, what), "Data")
    if not isinstance(data, dict):
        raise FormatError(f"{what}: 'Data' must be an object")
    entries: dict[tuple[str, str], dict[str, list[str]]] = {}
    numa: dict[str, int] = {}
    for i, entry in enumerate(go_key(data, "PodDeviceEntries") or []):
        where = f"{what}: PodDeviceEntries[{i}]"
        if not isinstance(entry, dict):
            raise FormatError(f"{where} must be an object")
        pod, container, resource = (go_key(entry, k) for k in ("PodUID", "ContainerName", "ResourceName"))
        if not all(isinstance(v, str) and v for v in (pod, container, resource)):
            raise FormatError(f"{where} needs PodUID, ContainerName and ResourceName strings")
        ids = go_key(entry, "DeviceIDs") or []
        by_numa = ids if isinstance(ids, dict) else {"-1": ids}
        held = entries.setdefault((str(pod), str(container)), {}).setdefault(str(resource), [])
        for key, devices in by_numa.items():
            node = parse_int(key, f"{where}.DeviceIDs key", minimum=-1)
            if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
                raise FormatError(f"{where}.DeviceIDs[{key!r}] must be a list of device ids")
            held.extend(devices)
            numa.update({d: node for d in devices if node >= 0})
    registered = go_key(data, "RegisteredDevices") or {}
    if not isinstance(registered, dict) or not all(
            isinstance(ids, list) and all(isinstance(d, str) for d in ids) for ids in registered.values()):
        raise FormatError(f"{what}: 'RegisteredDevices' must map resources to lists of device ids")
    return {"entries": entries, "numa": numa, "registered": {str(r): list(ids) for r, ids in registered.items()}}


def allocations(text: str, fmt: str) -> list[Allocation]:
    if fmt == "cpu-manager-state":
        return [Allocation(pod, container, cpus, origin=IMPORTED)
                for (pod, container), cpus in cpu_state(text)["entries"].items()]
    return [Allocation(pod, container, memory=memory, origin=IMPORTED)
            for (pod, container), memory in memory_state(text)["entries"].items()]


def merge(old: Allocation | None, new: Allocation) -> Allocation:
    """CPU and memory state of one container in one allocation."""
    if old is None:
        return new
    memory = {n: dict(r) for n, r in old.memory.items()}
    for n, res in new.memory.items():
        for r, b in res.items():
            memory.setdefault(n, {})[r] = memory.get(n, {}).get(r, 0) + b
    return Allocation(old.pod, old.container, old.cpus | new.cpus, memory, {**old.devices, **new.devices},
                      IMPORTED)


def load_as_topology(text: str, fmt: str) -> Loaded:
    """The little a state file says about the machine, as a Loaded result (everything inferred)."""

    draft = Draft(description=fmt)
    draft.inferred.update(("cores", "sockets"))
    extra: dict[str, object]
    if fmt == "cpu-manager-state":
        state = cpu_state(text)
        cpus = state["default"]
        for c in state["entries"].values():
            cpus = cpus | c
        if not cpus:
            raise FormatError("cpu_manager_state: no CPUs in defaultCpuSet or entries")
        draft.inferred.add("numa_nodes")
        for cpu in cpus:
            draft.cpus.append(CPURecord(cpu, ("cpu", cpu), 0, 0))
        extra = {"policy": state["policy"], "default_cpuset": str(state["default"]), "checksum": state["checksum"],
                 "layout": state["layout"]}
        notes = ["CPUs are defaultCpuSet plus assigned CPUs; reserved CPUs are missing with strict-cpu-reservation"]
    else:
        memory = memory_state(text)
        if not memory["nodes"]:
            raise FormatError("memory_manager_state: no machineState")
        draft.inferred.add("cpus")
        for nid, res in memory["nodes"].items():
            draft.numa_memory[nid] = res.get("memory", 0)
            pages = {r: b for r, b in res.items() if r.startswith("hugepages-")}
            if pages:
                draft.numa_hugepages[nid] = pages
            draft.cpus.append(CPURecord(nid, ("cpu", nid), nid, nid))
        extra = {"policy": memory["policy"], "checksum": memory["checksum"]}
        notes = ["memory_manager_state has no CPUs: one placeholder CPU per NUMA node"]
    topology = build_topology(draft, fmt)
    return Loaded(fmt, topology, None, allocations(text, fmt), notes + draft.notes, [], extra)
