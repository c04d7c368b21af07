"""Volcano Numatopology (`nodeinfo.volcano.sh/v1alpha1`).

Import: `spec.cpuDetail` maps CPU id strings to {numa, socket, core}; the fields are omitempty
ints, so a missing field is 0. Volcano's core id counts per socket, so a core is the pair
(socket, core) and gets the smallest thread id as its engine id. `numares.<res>` has `capacity`
(int) and `allocatable` (a cpuset for cpu); CPUs not in a given cpu allocatable set are reserved.
`policies` (CPUManagerPolicy, TopologyManagerPolicy, TopologyManagerScope) set the kubelet;
empty strings mean the kubelet default. `resReserved.cpu` is kept as reserved millicores when no
allocatable set says which CPUs. The CRD schema itself is refused with a clear error.

Export (`dump`): a Node as a Numatopology: cpuDetail (zeros omitted, core ids per socket),
numares cpu allocatable = the CPUs not reserved, capacity = all, and the policies.
"""

from __future__ import annotations

from typing import Literal, TypedDict

import yaml

from ..errors import EngineError, FormatError
from ..model.cpuset import CPUSet
from ..model.kubelet_config import KubeletConfig
from ..model.node import Allocation, Node
from ..model.quantity import cpu_milli
from ._documents import JSONObject, get_object, load_yaml_documents
from ._draft import CPURecord, Draft
from ._values import parse_int

_PolicyField = Literal["cpu_manager_policy", "topology_manager_policy", "topology_manager_scope",
                       "memory_manager_policy"]
_POLICY_KEYS: dict[str, _PolicyField] = {
    "CPUManagerPolicy": "cpu_manager_policy", "TopologyManagerPolicy": "topology_manager_policy",
    "TopologyManagerScope": "topology_manager_scope", "MemoryManagerPolicy": "memory_manager_policy"}


class _Settings(TypedDict, total=False):
    """The KubeletConfig fields a Numatopology can state."""

    cpu_manager_policy: str
    topology_manager_policy: str
    topology_manager_scope: str
    memory_manager_policy: str
    reserved_cpus: CPUSet
    reserved_cpu_milli: int


def load(text: str) -> tuple[Draft, KubeletConfig | None, dict[str, object], list[Allocation]]:
    docs = [d for d in load_yaml_documents(text, "Numatopology") if d is not None]
    if any(isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition" for d in docs):
        raise FormatError("Numatopology: this is the CustomResourceDefinition (the schema), not a Numatopology "
                          "object; export one with `kubectl get numatopologies <node> -o yaml`")
    objs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Numatopology"]
    if len(objs) != 1:
        raise FormatError(f"Numatopology: expected one object, found {len(objs)}")
    return from_object(objs[0])


def from_object(obj: JSONObject) -> tuple[Draft, KubeletConfig | None, dict[str, object], list[Allocation]]:
    """One parsed Numatopology object → draft, kubelet settings, `extra` (numares), allocations (none)."""
    name = get_object(obj, "metadata", "Numatopology").get("name", "")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise FormatError(f"Numatopology {name}: no spec")
    detail = spec.get("cpuDetail")
    if not isinstance(detail, dict) or not detail:
        raise FormatError(f"Numatopology {name}: spec.cpuDetail must map CPU ids to {{numa, socket, core}}")
    draft = Draft(description=f"Numatopology {name}")
    for key, info in detail.items():
        where = f"Numatopology {name}: spec.cpuDetail[{key!r}]"
        cpu = parse_int(key, f"{where} CPU id")
        info = info or {}
        if not isinstance(info, dict):
            raise FormatError(f"{where} must be an object")
        unknown = set(info) - {"numa", "socket", "core"}
        if unknown:
            raise FormatError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        numa, socket, core = (parse_int(info.get(k, 0), f"{where}.{k}") for k in ("numa", "socket", "core"))
        draft.cpus.append(CPURecord(cpu, ("core", socket, core, numa), socket, numa))
    draft.cpus.sort(key=lambda r: r.id)
    numares = spec.get("numares") or {}
    reserved = None
    cpu_res = numares.get("cpu") if isinstance(numares, dict) else None
    if isinstance(cpu_res, dict) and cpu_res.get("allocatable"):
        try:
            allocatable = CPUSet.parse(str(cpu_res["allocatable"]))
        except EngineError as exc:
            raise FormatError(f"Numatopology {name}: numares.cpu.allocatable: {exc}") from None
        reserved = CPUSet(r.id for r in draft.cpus) - allocatable
    settings: _Settings = {}
    for key, value in get_object(spec, "policies", f"Numatopology {name}: spec").items():
        if key in _POLICY_KEYS and value:
            settings[_POLICY_KEYS[key]] = str(value)
    if reserved:
        settings["reserved_cpus"] = reserved
    res_reserved = spec.get("resReserved") or {}
    if not reserved and isinstance(res_reserved, dict) and res_reserved.get("cpu"):
        try:
            settings["reserved_cpu_milli"] = cpu_milli(res_reserved["cpu"], f"Numatopology {name}: resReserved.cpu")
        except EngineError as exc:
            raise FormatError(str(exc)) from None
    try:
        kubelet = KubeletConfig(**settings) if settings or spec.get("policies") is not None else None
    except EngineError as exc:
        raise FormatError(f"Numatopology {name}: {exc}") from None
    return draft, kubelet, {"node_name": name, "numares": numares}, []


def dump(node: object) -> str:
    """A Node as a Volcano Numatopology YAML object."""
    if not isinstance(node, Node):
        raise FormatError("Numatopology export needs a Node")
    t = node.topology
    per_socket: dict[int, list[int]] = {}
    for core in t.core_cpus:
        sockets = {t.cpu_info[c].socket for c in _ids(t.core_cpus[core])}
        per_socket.setdefault(min(sockets), []).append(core)
    core_index = {core: i for cores in per_socket.values() for i, core in enumerate(sorted(cores))}
    detail: dict[str, dict[str, int]] = {}
    for c in t.cpus:
        entry = {}
        for key, value in (("numa", c.numa), ("socket", c.socket), ("core", core_index[c.core])):
            if value:
                entry[key] = value
        detail[str(c.id)] = entry
    k = node.kubelet
    allocatable = CPUSet(t.all_cpus & ~node.reserved_cpus.mask)
    spec = {
        "cpuDetail": detail,
        "numares": {"cpu": {"allocatable": str(allocatable), "capacity": len(t.cpus)}},
        "policies": {"CPUManagerPolicy": k.cpu_manager_policy, "TopologyManagerPolicy": k.topology_manager_policy,
                     "TopologyManagerScope": k.topology_manager_scope},
    }
    obj = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
           "metadata": {"name": node.name}, "spec": spec}
    return yaml.safe_dump(obj, sort_keys=False)


def _ids(mask: int) -> list[int]:
    return list(CPUSet(mask))
