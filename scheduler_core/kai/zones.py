"""A node's NUMA zones as KAI reads them from its NodeResourceTopology: per zone, the Allocatable
and Available amount of every resource the zone reports, and the kubelet's policy and scope from
the object's attributes.

Units: cpu in millicores (KAI's vectors hold milli-CPU), memory and hugepages in bytes, devices as
counts. Zones are ordered by NUMA id (KAI sorts them so its lowest-zone choices are the kubelet's).
The published amounts are those of `formats.nrt.dump`: allocatable = capacity − reserved, available
= allocatable − what the kubelet holds (KAI's default `reconstructAvailable`: Allocatable minus the
observed placements of the pods on the node)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    zones report (sorted by name), their Allocatable and, per resource, the descending prefix sums
    of the zones' Allocatable (the restricted policy's preferred width is a scan of these).
    `sources` says where each zone's Available of each resource comes from on the node: its CPU
    mask (cpu), None (memory and hugepages), or its healthy device ids (devices)."""

    policy: str
    scope: str
    numa_ids: tuple[int, ...]
    resources: tuple[str, ...]
    allocatable: Amounts
    prefix: tuple[tuple[int, ...], ...] = field(init=False)
    sources: tuple[tuple[int | tuple[str, ...] | None, ...], ...] = ()

    def __post_init__(self) -> None:
        prefix = []
        for r in range(len(self.resources)):
            acc, sums = 0, []
            for value in sorted((zone[r] for zone in self.allocatable), reverse=True):
                acc += value
                sums.append(acc)
            prefix.append(tuple(sums))
        object.__setattr__(self, "prefix", tuple(prefix))

    @classmethod
    def of(cls, node: Node) -> ZoneTopology:
        """The node's zones as its NRT would publish them (independent of what is allocated)."""
        t = node.topology
        zones: list[dict[str, tuple[int, int | tuple[str, ...] | None]]] = []
        for nid in sorted(t.numa_ids):
            cpus = t.numa_cpus[nid]
            zone: dict[str, tuple[int, int | tuple[str, ...] | None]] = {
                "cpu": ((cpus & ~node.reserved_cpus.mask).bit_count() * 1000, cpus)}
            numa = t.numa_node(nid)
            reserved = node.kubelet.reserved_memory.get(nid, {})
            for name, total in [("memory", numa.memory), *numa.hugepages.items()]:
                if total:
                    zone[name] = (total - reserved.get(name, 0), None)
            for name in t.device_resources():
                devs = [d for d in t.devices_of(name) if d.numa and nid in d.numa]
                if devs:
                    healthy = tuple(d.id for d in devs if d.healthy)
                    zone[name] = (len(healthy), healthy)
            zones.append(zone)
        resources = tuple(sorted({r for z in zones for r in z}))
        k = node.kubelet
        return cls(k.topology_manager_policy, k.topology_manager_scope, tuple(sorted(t.numa_ids)), resources,
                   tuple(tuple(z[r][0] if r in z else 0 for r in resources) for z in zones),
                   tuple(tuple(z[r][1] if r in z else () for r in resources) for z in zones))

    def available(self, node: Node) -> Amounts:
        """The zones' Available on the node: allocatable minus what the kubelet holds there."""
        free, used = node.free_cpus, node.used_devices
        out = []
        for nid, sources in zip(self.numa_ids, self.sources, strict=True):
            row = []
            for name, source in zip(self.resources, sources, strict=True):
                if isinstance(source, int):
                    row.append((source & free).bit_count() * 1000)
                elif source is None:
                    row.append(node.memory_free(nid, name))
                else:
                    row.append(sum(1 for d in source if (name, d) not in used))
            out.append(tuple(row))
        return tuple(out)


def is_qos_gated(resource: str) -> bool:
    """cpu, memory and hugepages: aligned by the kubelet only for Guaranteed pods (CPU and Memory Managers)."""
    return resource == "cpu" or is_memory_resource(resource)
