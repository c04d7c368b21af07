"""A node as the engine sees it: topology, kubelet settings and who holds what (allocations),
with the free state derived once and kept up to date incrementally on allocate and release."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import InsufficientResourcesError, RequestError, TopologyError
from .cpuset import CPUSet
from .kubelet_config import KubeletConfig
from .names import check_printable
from .reserved import reserved_cpus
from .topology import Topology

SCHEDULED, IMPORTED = "scheduled", "imported"
NO_CPUS = CPUSet()  # immutable: one empty set serves every allocation that pins no CPU
NO_LABELS: Mapping[str, str] = MappingProxyType({})
#: the node labels an engine model decides by (Koordinator's NodeNUMAResource reads these two). A node's
#: `state_key` holds them and no other label: nodes that differ only in, say, their hostname label still
#: share their key, so headroom and make room keep answering once per group of like nodes.
KOORD_CPU_BIND_POLICY = "node.koordinator.sh/cpu-bind-policy"
KOORD_NUMA_TOPOLOGY_POLICY = "node.koordinator.sh/numa-topology-policy"
DECISION_LABELS = (KOORD_CPU_BIND_POLICY, KOORD_NUMA_TOPOLOGY_POLICY)


def node_labels(labels: object) -> Mapping[str, str]:
    """A node's labels as a read-only mapping sorted by name; TopologyError (field `labels`) unless every
    name and value is a string."""
    if labels is None:
        return NO_LABELS
    if not isinstance(labels, Mapping):
        raise TopologyError(f"labels must map label names to values, not {type(labels).__name__}", "labels")
    if not labels:
        return NO_LABELS
    for key, value in labels.items():
        if not isinstance(key, str) or not key:
            raise TopologyError(f"labels: a label name must be a non-empty string, not {key!r:.60}", "labels")
        if not isinstance(value, str):
            raise TopologyError(f"labels: the value of {key!r:.60} must be a string, not {value!r:.60}", "labels")
    return MappingProxyType(dict(sorted(labels.items())))


@dataclass(frozen=True)
class Allocation:
    """What one container (or, with `container=None`, a whole pod) holds on a node:
    exclusive CPUs, memory per NUMA node (`{numa: {resource: bytes}}`) and devices per resource."""

    pod: str
    container: str | None = None
    cpus: CPUSet = NO_CPUS
    memory: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    origin: str = SCHEDULED

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "container": self.container,
            "cpus": str(self.cpus),
            "memory": {str(n): dict(r) for n, r in sorted(self.memory.items())},
            "devices": {r: list(ids) for r, ids in sorted(self.devices.items())},
            "origin": self.origin,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Allocation:
        try:
            memory = {int(n): {str(r): int(b) for r, b in res.items()} for n, res in (data.get("memory") or {}).items()}
            devices = {str(r): tuple(str(i) for i in ids) for r, ids in (data.get("devices") or {}).items()}
        except (TypeError, ValueError, AttributeError):
            raise RequestError(f"allocation of {data.get('pod')!r}: memory must map NUMA ids to "
                               "{resource: bytes} and devices resources to id lists") from None
        if not data.get("pod"):
            raise RequestError("an allocation needs the pod it belongs to")
        check_printable(str(data["pod"]), "pod", field="pod")
        check_printable(str(data.get("container") or ""), "container", field="container")
        return cls(str(data["pod"]), data.get("container"), CPUSet.parse(data.get("cpus") or ""),
                   memory, devices, data.get("origin", SCHEDULED))


class Node:
    """A node and its current allocations. `free_cpus` is the exclusive pool the CPU Manager can
    still hand out (all CPUs − reserved − allocated); memory and devices in use are tracked too.
    `labels` are the Node object's (a scheduler model may read some: `DECISION_LABELS`)."""

    def __init__(self, name: str, topology: Topology, kubelet: KubeletConfig | None = None,
                 allocations: Iterable[Allocation] = (), numatopology: bool = True,
                 labels: Mapping[str, str] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyError("a node needs a non-empty name")
        check_printable(name, "node name", TopologyError, "name")
        self.name = name
        self.topology = topology
        self.kubelet = kubelet or KubeletConfig()
        #: whether the node publishes a Numatopology object (Volcano's resource exporter runs there)
        self.numatopology = numatopology
        self.labels = node_labels(labels)
        self.decision_labels = tuple((k, self.labels[k]) for k in DECISION_LABELS if k in self.labels)
        self.reserved_cpus = self._reserved()
        self.allocations: list[Allocation] = []
        self.free_cpus = topology.all_cpus & ~self.reserved_cpus.mask
        self.used_devices: set[tuple[str, str]] = set()
        self.memory_used: dict[int, dict[str, int]] = {n: {} for n in topology.numa_ids}
        for alloc in allocations:
            self.allocate(alloc)

    def _reserved(self) -> CPUSet:
        """The CPU Manager's reserved CPUs (`model.reserved`: `reservedSystemCPUs`, else ceil(reserved
        milli / 1000) CPUs picked the kubelet's way); none when neither is set."""
        k = self.kubelet
        if k.reserved_cpus is None and not k.reserved_cpu_milli:
            return CPUSet()
        return reserved_cpus(self.topology, k)

    # -- state changes ---------------------------------------------------------------------------
    def allocate(self, alloc: Allocation) -> None:
        """Record an allocation; refuses CPUs or devices someone already holds (no double booking)."""
        mask = alloc.cpus.mask
        if mask & ~self.topology.all_cpus:
            raise InsufficientResourcesError(
                f"node {self.name}: CPUs {CPUSet(mask & ~self.topology.all_cpus)} are not on the machine")
        taken = mask & ~self.free_cpus
        if taken:
            raise InsufficientResourcesError(
                f"node {self.name}: CPUs {CPUSet(taken)} of {alloc.pod} are reserved or already allocated")
        known = {(d.resource, d.id) for d in self.topology.devices}
        for res, ids in alloc.devices.items():
            for dev in ids:
                if (res, dev) not in known:
                    raise InsufficientResourcesError(f"node {self.name}: device {dev} of {res} is not on the node")
                if (res, dev) in self.used_devices:
                    raise InsufficientResourcesError(f"node {self.name}: device {dev} of {res} is already allocated")
        for nid in alloc.memory:
            if nid not in self.memory_used:
                raise InsufficientResourcesError(f"node {self.name}: NUMA node {nid} does not exist")
        self.free_cpus &= ~mask
        for res, ids in alloc.devices.items():
            self.used_devices.update((res, dev) for dev in ids)
        for nid, amounts in alloc.memory.items():
            used = self.memory_used[nid]
            for r, amount in amounts.items():
                used[r] = used.get(r, 0) + amount
        self.allocations.append(alloc)

    def release(self, pod: str) -> list[Allocation]:
        """Drop every allocation of `pod`; returns what was released."""
        gone = [a for a in self.allocations if a.pod == pod]
        if not gone:
            return []
        self.allocations = [a for a in self.allocations if a.pod != pod]
        for alloc in gone:
            self.free_cpus |= alloc.cpus.mask
            for res, ids in alloc.devices.items():
                self.used_devices.difference_update((res, dev) for dev in ids)
            for nid, amounts in alloc.memory.items():
                used = self.memory_used[nid]
                for r, amount in amounts.items():
                    left = used[r] - amount
                    if left:
                        used[r] = left
                    else:
                        del used[r]  # keep state_key equal to a node that never held it
        return gone

    def copy(self) -> Node:
        """An independent copy sharing the immutable topology (for what-if and rollback)."""
        other = Node.__new__(Node)
        other.name, other.topology, other.kubelet = self.name, self.topology, self.kubelet
        other.numatopology = self.numatopology
        other.labels, other.decision_labels = self.labels, self.decision_labels
        other.reserved_cpus = self.reserved_cpus
        other.allocations = list(self.allocations)
        other.free_cpus = self.free_cpus
        other.used_devices = set(self.used_devices)
        other.memory_used = {n: dict(r) for n, r in self.memory_used.items()}
        return other

    # -- views -----------------------------------------------------------------------------------
    def free_cpus_per_numa(self) -> dict[int, int]:
        free = self.free_cpus
        return {n: (m & free).bit_count() for n, m in self.topology.numa_cpus.items()}

    def memory_free(self, numa: int, resource: str = "memory") -> int:
        """Bytes of `resource` still free on a NUMA node (capacity − reserved − used)."""
        node = self.topology.numa_node(numa)
        total = node.memory if resource == "memory" else node.hugepages.get(resource, 0)
        reserved = self.kubelet.reserved_memory.get(numa, {}).get(resource, 0)
        return total - reserved - self.memory_used[numa].get(resource, 0)

    def free_devices(self, resource: str) -> list[str]:
        return [d.id for d in self.topology.devices
                if d.resource == resource and d.healthy and (resource, d.id) not in self.used_devices]

    def numa_mask_of(self, allocations: Iterable[Allocation]) -> int:
        """NUMA nodes some allocations touch: their CPUs, memory blocks and devices."""
        topo = self.topology
        mask = 0
        device_numa = None
        for a in allocations:
            if a.cpus:
                mask |= topo.numa_mask_of_cpus(a.cpus)
            for nid, res in a.memory.items():
                if any(res.values()):
                    mask |= 1 << nid
            if a.devices:
                if device_numa is None:
                    device_numa = {(d.resource, d.id): d.numa for d in topo.devices}
                for r, ids in a.devices.items():
                    for i in ids:
                        for nid in device_numa.get((r, i)) or ():
                            mask |= 1 << nid
        return mask

    def state_key(self) -> tuple[Any, ...]:
        """Equal keys ⇒ the engine decides identically on both nodes (same shape, settings, free state)."""
        return (self.topology.fingerprint, self.kubelet, self.numatopology, self.decision_labels, self.free_cpus,
                frozenset(self.used_devices),
                tuple(sorted((n, tuple(sorted(r.items()))) for n, r in self.memory_used.items())))

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "topology": self.topology.to_dict(), "kubelet": self.kubelet.to_dict(),
               "allocations": [a.to_dict() for a in self.allocations], "numatopology": self.numatopology}
        if self.labels:
            out["labels"] = dict(self.labels)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        return cls(str(data.get("name", "")), Topology.from_dict(data.get("topology") or {}),
                   KubeletConfig.from_dict(data.get("kubelet")),
                   [Allocation.from_dict(a) for a in data.get("allocations") or ()],
                   bool(data.get("numatopology", True)), node_labels(data.get("labels")))

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.topology!r}, {len(self.allocations)} allocations)"
