"""Kubernetes NodeResourceTopology (`topology.node.k8s.io` v1alpha1 and v1alpha2).

Import: zones of `type: Node` named `node-<N>` are NUMA node N (other names get ids in zone order).
`cpu` capacity is a count; NRT has no CPU ids, so CPU ids are dealt out in zone order (node-0 gets
0..c0-1, and so on), every CPU its own core and each NUMA node its own socket — flagged as
`cpus`, `cores`, `sockets` in `inferred`. `memory`/`hugepages-*` capacities set the node's memory;
any other resource becomes `capacity` devices `<resource>-<zone>-<i>` on that node. `costs` are the
distances. The kubelet policy/scope come from v1alpha2 `attributes` (topologyManagerPolicy,
topologyManagerScope), else from `topologyPolicies` (e.g. SingleNUMANodeContainerLevel).
Capacity − allocatable of cpu is reported as reserved CPUs (the lowest ids of the zone).

Export (`dump`): a Node as a v1alpha2 object, one zone per NUMA node, with capacity, allocatable
(capacity − reserved) and available (allocatable − allocated), costs and attributes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from ..errors import EngineError, FormatError
from ..model.cpuset import CPUSet
from ..model.kubelet_config import KubeletConfig
from ..model.node import Node
from ..model.quantity import count
from ..model.topology import Device
from ._documents import JSONObject, get_list, get_object, load_yaml_documents
from ._draft import CPURecord, Draft

_POLICY_NAMES = {
    "SingleNUMANode": "single-numa-node", "Restricted": "restricted", "BestEffort": "best-effort", "None": "none",
}


@dataclass
class Zones:
    """What the NUMA zones state beyond the topology: per zone, {resource: {capacity, allocatable,
    available}}; each zone's NUMA id; and the kube/system-reserved CPUs and memory it implies."""

    stats: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    numa_id: dict[str, int] = field(default_factory=dict)
    reserved: list[int] = field(default_factory=list)
    reserved_memory: dict[int, dict[str, int]] = field(default_factory=dict)


def _policy(values: list[object]) -> tuple[str, str] | None:
    for v in values:
        for prefix, policy in _POLICY_NAMES.items():
            if str(v).startswith(prefix):
                scope = "pod" if str(v).endswith("PodLevel") else "container"
                return policy, scope
    return None


def _object(text: str) -> JSONObject:
    docs = [d for d in load_yaml_documents(text, "NodeResourceTopology") if d is not None]
    objs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "NodeResourceTopology"]
    if len(objs) != 1:
        raise FormatError(f"NodeResourceTopology: expected one object, found {len(objs)}")
    return objs[0]


def load(text: str) -> tuple[Draft, KubeletConfig | None, dict[str, object]]:
    obj = _object(text)
    draft, kubelet, zones = from_object(obj)
    extra: dict[str, object] = {"node_name": _name_of(obj), "zones": zones.stats, "zone_to_numa_id": zones.numa_id,
                                "api_version": obj.get("apiVersion", "")}
    return draft, kubelet, extra


def _name_of(obj: JSONObject) -> object:
    return get_object(obj, "metadata", "NodeResourceTopology").get("name", "")


def from_object(obj: JSONObject) -> tuple[Draft, KubeletConfig | None, Zones]:
    """One parsed NodeResourceTopology object → draft, kubelet settings it states, and its zones."""
    name = _name_of(obj)
    zones = obj.get("zones")
    if not isinstance(zones, list) or not zones:
        raise FormatError(f"NodeResourceTopology {name}: 'zones' must be a non-empty list")
    draft = Draft(description=f"NodeResourceTopology {name}")
    draft.inferred.update(("cpus", "cores", "sockets"))
    out = Zones()
    numa_zones = _numa_zones(zones, out.numa_id, f"NodeResourceTopology {name}")
    for zone_name, zone in numa_zones:
        where = f"NodeResourceTopology {name}: zone {zone_name}"
        nid = out.numa_id[zone_name]
        out.stats[zone_name] = _zone_resources(zone, zone_name, nid, draft, out, where)
        _zone_costs(zone, nid, out.numa_id, draft, where)
    if not draft.cpus:
        raise FormatError(f"NodeResourceTopology {name}: no zone has a cpu capacity")
    kubelet = _kubelet(obj, out, f"NodeResourceTopology {name}")
    if kubelet is not None and out.reserved:
        draft.inferred.add("reserved_cpus")
    return draft, kubelet, out


def _zone_name(value: object) -> str | None:
    """A zone name as text: a string or a number (YAML reads `name: 0` as one); None for anything else."""
    if not value or isinstance(value, dict | list):
        return None
    return str(value)


def _numa_zones(zones: list[object], numa_id: dict[str, int], where: str) -> list[tuple[str, JSONObject]]:
    """The zones of `type: Node` with their names, each name's NUMA id put in `numa_id`: N for
    `node-N`, else the lowest id no zone has taken, in zone order."""
    numa_zones: list[tuple[str, JSONObject, int | None]] = []
    for i, zone in enumerate(zones):
        zone_name = _zone_name(zone.get("name")) if isinstance(zone, dict) else None
        if not isinstance(zone, dict) or zone_name is None:
            raise FormatError(f"{where}: zones[{i}] needs a name")
        if zone.get("type", "Node") != "Node":
            continue
        m = re.fullmatch(r"node-(\d+)", zone_name)
        numa_zones.append((zone_name, zone, int(m.group(1)) if m else None))
    used = {n for _, _, n in numa_zones if n is not None}
    next_id = 0
    for zone_name, _zone, nid in numa_zones:
        if nid is None:
            while next_id in used:
                next_id += 1
            nid = next_id
            used.add(nid)
        if zone_name in numa_id:
            raise FormatError(f"{where}: zone {zone_name!r} is listed twice")
        numa_id[zone_name] = nid
    return [(zone_name, zone) for zone_name, zone, _ in numa_zones]


def _zone_resources(zone: JSONObject, zone_name: str, nid: int, draft: Draft, out: Zones,
                    where: str) -> dict[str, dict[str, int]]:
    """A zone's resources into the draft: `cpu` as CPUs dealt out in zone order (capacity −
    allocatable of them reserved), memory and hugepages, anything else as devices; returns the
    zone's capacity/allocatable/available per resource."""
    resources = zone.get("resources") or []
    if not isinstance(resources, list):
        raise FormatError(f"{where}: 'resources' must be a list")
    draft.numa_memory.setdefault(nid, 0)
    stats = {}
    for j, res in enumerate(resources):
        if not isinstance(res, dict) or not res.get("name"):
            raise FormatError(f"{where}: resources[{j}] needs a name")
        rname = str(res["name"])
        try:
            cap = count(res.get("capacity", 0), f"{where}: {rname} capacity")
            alloc = count(res.get("allocatable", cap), f"{where}: {rname} allocatable")
            avail = count(res.get("available", alloc), f"{where}: {rname} available")
        except EngineError as exc:
            raise FormatError(str(exc)) from None
        stats[rname] = {"capacity": cap, "allocatable": alloc, "available": avail}
        if rname == "cpu":
            if cap > 65536:
                raise FormatError(f"{where}: cpu capacity {cap} is too large")
            first = len(draft.cpus)
            for k in range(first, first + cap):
                draft.cpus.append(CPURecord(k, ("cpu", k), nid, nid))
            out.reserved.extend(range(first, first + max(0, cap - alloc)))
        elif rname == "memory":
            draft.numa_memory[nid] = cap
            if cap > alloc:
                out.reserved_memory.setdefault(nid, {})["memory"] = cap - alloc
        elif rname.startswith("hugepages-"):
            draft.numa_hugepages.setdefault(nid, {})[rname] = cap
        else:
            if cap > 4096:
                raise FormatError(f"{where}: {rname} capacity {cap} is too large for a device count")
            short = rname.rsplit("/", 1)[-1]
            for k in range(cap):
                draft.devices.append(Device(f"{short}-{zone_name}-{k}", rname, (nid,), True, rname))
    return stats


def _zone_costs(zone: JSONObject, nid: int, numa_id: dict[str, int], draft: Draft, where: str) -> None:
    """A zone's `costs` as its row of the distance matrix."""
    costs = get_list(zone, "costs", where)
    if not costs:
        return
    if draft.distances is None:
        draft.distances = {}
    row = draft.distances.setdefault(nid, {})
    for cost in costs:
        target = _zone_name(cost.get("name")) if isinstance(cost, dict) else None
        if not isinstance(cost, dict) or target is None or target not in numa_id:
            raise FormatError(f"{where}: cost {cost!r} names no zone")
        try:
            row[numa_id[target]] = count(cost.get("value"), f"{where}: cost to {target}")
        except EngineError as exc:
            raise FormatError(str(exc)) from None


def _kubelet(obj: JSONObject, zones: Zones, where: str) -> KubeletConfig | None:
    """The kubelet settings the object states: v1alpha2 attributes, else v1alpha1 topologyPolicies,
    and the reserved CPUs and memory; None when it states none."""
    attrs = {str(a.get("name")): str(a.get("value")) for a in get_list(obj, "attributes", where)
             if isinstance(a, dict)}
    policy = attrs.get("topologyManagerPolicy")
    scope = attrs.get("topologyManagerScope")
    if policy is None:
        from_list = _policy(get_list(obj, "topologyPolicies", where))
        if from_list:
            policy, scope = from_list[0], scope or from_list[1]
    reserved = zones.reserved
    if policy is None and scope is None and not reserved:
        return None
    try:
        return KubeletConfig(
            cpu_manager_policy="static" if reserved else "none",
            reserved_cpus=CPUSet(reserved) if reserved else None,
            topology_manager_policy=policy or "none", topology_manager_scope=scope or "container",
            reserved_memory=zones.reserved_memory)
    except EngineError as exc:
        raise FormatError(f"{where}: {exc}") from None


def dump(node: object) -> str:
    """A Node (topology, kubelet settings, allocations) as a v1alpha2 NodeResourceTopology YAML."""
    if not isinstance(node, Node):
        raise FormatError("NRT export needs a Node (its topology and free state)")
    t = node.topology
    zones = []
    for nid in t.numa_ids:
        cpus = t.numa_cpus[nid]
        cap = cpus.bit_count()
        alloc = (cpus & ~node.reserved_cpus.mask).bit_count()
        free = (cpus & node.free_cpus).bit_count()
        resources = [{"name": "cpu", "capacity": cap, "allocatable": alloc, "available": free}]
        numa = t.numa_node(nid)
        reserved_mem = node.kubelet.reserved_memory.get(nid, {})
        for rname, total in [("memory", numa.memory), *sorted(numa.hugepages.items())]:
            if not total:
                continue
            allocatable = total - reserved_mem.get(rname, 0)
            resources.append({"name": rname, "capacity": total, "allocatable": allocatable,
                              "available": node.memory_free(nid, rname)})
        for rname in t.device_resources():
            devs = [d for d in t.devices_of(rname) if d.numa and nid in d.numa]
            if devs:
                free_ids = set(node.free_devices(rname))
                healthy = sum(1 for d in devs if d.healthy)
                resources.append({"name": rname, "capacity": len(devs), "allocatable": healthy,
                                  "available": sum(1 for d in devs if d.id in free_ids)})
        zone = {"name": f"node-{nid}", "type": "Node", "resources": resources}
        if t.distances is not None:
            zone["costs"] = [{"name": f"node-{b}", "value": t.distance(nid, b)} for b in t.numa_ids]
        zones.append(zone)
    k = node.kubelet
    obj = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node.name},
        "attributes": [{"name": "topologyManagerPolicy", "value": k.topology_manager_policy},
                       {"name": "topologyManagerScope", "value": k.topology_manager_scope}],
        "zones": zones,
    }
    return yaml.safe_dump(obj, sort_keys=False)
