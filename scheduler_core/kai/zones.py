"""A node's NUMA zones as KAI reads them from its NodeResourceTopology: per zone, the Allocatable
and Available amount of every resource the zone reports, and the kubelet's policy and scope from
the object's attributes.

Units: cpu in millicores (KAI's vectors hold milli-CPU), memory and hugepages in bytes, devices as
counts. Zones are ordered by NUMA id (KAI sorts them so its lowest-zone choices are the kubelet's).
The published amounts are those of `formats.nrt.dump`: allocatable = capacity − reserved, available
= allocatable − what the kubelet holds (KAI's default `reconstructAvailable`: Allocatable minus the
observed placements of the pods on the node)."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.node import Node
from ..model.pods import is_memory_resource

#: the Topology Manager policies KAI's predicate models (it predicts the kubelet's rejection)
MODELED = ("single-numa-node", "restricted")
#: the policies KAI accounts for in its ledger and scores: the modeled ones plus best-effort
SCORED = (*MODELED, "best-effort")

#: a zone × resource table of amounts (rows in zone order, columns in `ZoneTopology.resources` order)
Amounts = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class ZoneTopology:
    """What does not change within a session: policy, scope, the zones' NUMA ids, the resources the
    zones report (sorted by name) and, per resource, the descending prefix sums of the zones'
    Allocatable (the restricted policy's preferred width is a scan of these)."""

    policy: str
    scope: str
    numa_ids: tuple[int, ...]
    resources: tuple[str, ...]
    allocatable: Amounts
    prefix: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, policy: str, scope: str, numa_ids: tuple[int, ...], resources: tuple[str, ...],
              allocatable: Amounts) -> ZoneTopology:
        prefix = []
        for r in range(len(resources)):
            acc, sums = 0, []
            for value in sorted((zone[r] for zone in allocatable), reverse=True):
                acc += value
                sums.append(acc)
            prefix.append(tuple(sums))
        return cls(policy, scope, numa_ids, resources, allocatable, tuple(prefix))


def _zone_amounts(node: Node) -> tuple[tuple[str, ...], list[dict[str, tuple[int, int]]]]:
    """The resources the zones report and, per zone, {resource: (allocatable, available)}."""
    t = node.topology
    free_ids = {r: set(node.free_devices(r)) for r in t.device_resources()}
    zones: list[dict[str, tuple[int, int]]] = []
    for nid in sorted(t.numa_ids):
        cpus = t.numa_cpus[nid]
        zone = {"cpu": ((cpus & ~node.reserved_cpus.mask).bit_count() * 1000,
                        (cpus & node.free_cpus).bit_count() * 1000)}
        numa = t.numa_node(nid)
        reserved = node.kubelet.reserved_memory.get(nid, {})
        for name, total in [("memory", numa.memory), *numa.hugepages.items()]:
            if total:
                zone[name] = (total - reserved.get(name, 0), node.memory_free(nid, name))
        for name in t.device_resources():
            devs = [d for d in t.devices_of(name) if d.numa and nid in d.numa]
            if devs:
                zone[name] = (sum(1 for d in devs if d.healthy), sum(1 for d in devs if d.id in free_ids[name]))
        zones.append(zone)
    return tuple(sorted({r for z in zones for r in z})), zones


def node_zones(node: Node) -> tuple[ZoneTopology, Amounts]:
    """The node's zone topology and its zones' Available amounts as its NRT would publish them."""
    resources, zones = _zone_amounts(node)
    allocatable = tuple(tuple(z.get(r, (0, 0))[0] for r in resources) for z in zones)
    available = tuple(tuple(z.get(r, (0, 0))[1] for r in resources) for z in zones)
    k = node.kubelet
    topo = ZoneTopology.build(k.topology_manager_policy, k.topology_manager_scope,
                              tuple(sorted(node.topology.numa_ids)), resources, allocatable)
    return topo, available


def is_qos_gated(resource: str) -> bool:
    """cpu, memory and hugepages: aligned by the kubelet only for Guaranteed pods (CPU and Memory Managers)."""
    return resource == "cpu" or is_memory_resource(resource)
