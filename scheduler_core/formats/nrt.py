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

import yaml

from ..errors import EngineError, FormatError
from ..model.cpuset import CPUSet
from ..model.kubelet_config import KubeletConfig
from ..model.quantity import count
from ..model.topology import Device
from ._common import CPURecord, Draft, load_yaml_documents

_POLICY_NAMES = {
    "SingleNUMANode": "single-numa-node", "Restricted": "restricted", "BestEffort": "best-effort", "None": "none",
}


def _policy(values: list[str]) -> tuple[str, str] | None:
    for v in values:
        for prefix, policy in _POLICY_NAMES.items():
            if str(v).startswith(prefix):
                scope = "pod" if str(v).endswith("PodLevel") else "container"
                return policy, scope
    return None


def _object(text: str) -> dict:
    docs = [d for d in load_yaml_documents(text, "NodeResourceTopology") if d is not None]
    objs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "NodeResourceTopology"]
    if len(objs) != 1:
        raise FormatError(f"NodeResourceTopology: expected one object, found {len(objs)}")
    return objs[0]


def load(text: str) -> tuple[Draft, KubeletConfig | None, dict]:
    return from_object(_object(text))


def from_object(obj: dict) -> tuple[Draft, KubeletConfig | None, dict]:
    """One parsed NodeResourceTopology object → draft, kubelet settings it states, and `extra`
    (zones with capacity/allocatable/available per resource, zone → NUMA id)."""
    name = (obj.get("metadata") or {}).get("name", "")
    zones = obj.get("zones")
    if not isinstance(zones, list) or not zones:
        raise FormatError(f"NodeResourceTopology {name}: 'zones' must be a non-empty list")
    draft = Draft(description=f"NodeResourceTopology {name}")
    draft.inferred.update(("cpus", "cores", "sockets"))
    zone_ids: dict[str, int] = {}
    numa_zones = []
    for i, zone in enumerate(zones):
        if not isinstance(zone, dict) or not zone.get("name"):
            raise FormatError(f"NodeResourceTopology {name}: zones[{i}] needs a name")
        if zone.get("type", "Node") != "Node":
            continue
        m = re.fullmatch(r"node-(\d+)", str(zone["name"]))
        numa_zones.append((i, zone, int(m.group(1)) if m else None))
    used = {n for _, _, n in numa_zones if n is not None}
    next_id = 0
    for _i, zone, nid in numa_zones:
        if nid is None:
            while next_id in used:
                next_id += 1
            nid = next_id
            used.add(nid)
        if zone["name"] in zone_ids:
            raise FormatError(f"NodeResourceTopology {name}: zone {zone['name']!r} is listed twice")
        zone_ids[zone["name"]] = nid
    cpu_id = 0
    reserved: list[int] = []
    reserved_memory: dict[int, dict[str, int]] = {}
    per_zone: dict[str, dict] = {}
    for _i, zone, _ in numa_zones:
        nid = zone_ids[zone["name"]]
        where = f"NodeResourceTopology {name}: zone {zone['name']}"
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
                for k in range(cap):
                    draft.cpus.append(CPURecord(cpu_id + k, ("cpu", cpu_id + k), nid, nid))
                reserved.extend(range(cpu_id, cpu_id + max(0, cap - alloc)))
                cpu_id += cap
            elif rname == "memory":
                draft.numa_memory[nid] = cap
                if cap > alloc:
                    reserved_memory.setdefault(nid, {})["memory"] = cap - alloc
            elif rname.startswith("hugepages-"):
                draft.numa_hugepages.setdefault(nid, {})[rname] = cap
            else:
                if cap > 4096:
                    raise FormatError(f"{where}: {rname} capacity {cap} is too large for a device count")
                short = rname.rsplit("/", 1)[-1]
                for k in range(cap):
                    draft.devices.append(Device(f"{short}-{zone['name']}-{k}", rname, (nid,), True, rname))
        per_zone[zone["name"]] = stats
        costs = zone.get("costs")
        if costs:
            row = draft.distances.setdefault(nid, {}) if draft.distances is not None else None
            if row is None:
                draft.distances = {}
                row = draft.distances.setdefault(nid, {})
            for cost in costs:
                if not isinstance(cost, dict) or cost.get("name") not in zone_ids:
                    raise FormatError(f"{where}: cost {cost!r} names no zone")
                try:
                    row[zone_ids[cost["name"]]] = count(cost.get("value"), f"{where}: cost to {cost['name']}")
                except EngineError as exc:
                    raise FormatError(str(exc)) from None
    if not draft.cpus:
        raise FormatError(f"NodeResourceTopology {name}: no zone has a cpu capacity")
    attrs = {str(a.get("name")): str(a.get("value")) for a in obj.get("attributes") or [] if isinstance(a, dict)}
    policy = attrs.get("topologyManagerPolicy")
    scope = attrs.get("topologyManagerScope")
    if policy is None:
        from_list = _policy(obj.get("topologyPolicies") or [])
        if from_list:
            policy, scope = from_list[0], scope or from_list[1]
    kubelet = None
    if policy is not None or scope is not None or reserved:
        try:
            kubelet = KubeletConfig(
                cpu_manager_policy="static" if reserved else "none",
                reserved_cpus=CPUSet(reserved) if reserved else None,
                topology_manager_policy=policy or "none", topology_manager_scope=scope or "container",
                reserved_memory=reserved_memory)
        except EngineError as exc:
            raise FormatError(f"NodeResourceTopology {name}: {exc}") from None
        if reserved:
            draft.inferred.add("reserved_cpus")
    extra = {"node_name": name, "zones": per_zone, "zone_to_numa_id": zone_ids,
             "api_version": obj.get("apiVersion", "")}
    return draft, kubelet, extra


def dump(node) -> str:
    """A Node (topology, kubelet settings, allocations) as a v1alpha2 NodeResourceTopology YAML."""
    from ..model.node import Node

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
