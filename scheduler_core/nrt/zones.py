"""What NodeResourceTopologyMatch reads of a node: its NUMA zones (available amount per resource, the
distances) and the Topology Manager settings the NRT object publishes, and of a pod: its requests.

Amounts are the engine's units (`model.pods`): cpu in millicores, memory and hugepages in bytes,
anything else a count. `value` is Go's `Quantity.Value()` (rounded up to a whole unit), which the
scoring strategies divide with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model.node import Node
from ..model.pods import GUARANTEED, Container, Pod, is_memory_resource

SINGLE_NUMA_NODE, CONTAINER, POD = "single-numa-node", "container", "pod"
POLICIES = ("none", "best-effort", "restricted", SINGLE_NUMA_NODE)
#: the plugin's default when the NRT object states no topologyManagerMaxNUMANodes (nodeconfig)
DEFAULT_MAX_NUMA_NODES = 8
#: zones whose NUMA id is above this are dropped (createNUMANodeList's maxNUMAId)
MAX_NUMA_ID = 64
#: the deprecated `topologyPolicies` values and the (policy, scope) each stands for
LEGACY_POLICIES = {
    "SingleNUMANodePodLevel": (SINGLE_NUMA_NODE, POD), "SingleNUMANodeContainerLevel": (SINGLE_NUMA_NODE, CONTAINER),
    "BestEffortPodLevel": ("best-effort", POD), "BestEffortContainerLevel": ("best-effort", CONTAINER),
    "RestrictedPodLevel": ("restricted", POD), "RestrictedContainerLevel": ("restricted", CONTAINER),
}


@dataclass(frozen=True)
class TopologyManagerConf:
    """The kubelet settings the plugin reads from an NRT object (nodeconfig.TopologyManager)."""

    policy: str = "none"
    scope: str = CONTAINER
    max_numa_nodes: int = DEFAULT_MAX_NUMA_NODES

    @classmethod
    def from_nrt(cls, attributes: Mapping[str, str], topology_policies: Iterable[str] = (),
                 base: TopologyManagerConf | None = None) -> TopologyManagerConf:
        """`base` (the plugin's defaults) updated from the legacy `topologyPolicies` first (only its first
        entry), then from the attributes, each value taken only when valid, as upstream does."""
        start = base or cls()
        policy, scope, max_numa = start.policy, start.scope, start.max_numa_nodes
        legacy = list(topology_policies)
        if legacy and legacy[0] in LEGACY_POLICIES:
            policy, scope = LEGACY_POLICIES[legacy[0]]
        for name, value in attributes.items():
            if name == "topologyManagerScope" and value in (CONTAINER, POD):
                scope = value
            elif name == "topologyManagerPolicy" and value in POLICIES:
                policy = value
            elif name == "topologyManagerMaxNUMANodes" and value.lstrip("-").isdigit() and int(value) > 1:
                max_numa = min(int(value), 1024)
        return cls(policy, scope, max_numa)


@dataclass
class Zone:
    """One NUMA zone as the plugin's NUMANode: its id, available amount per resource, distances."""

    numa_id: int
    resources: dict[str, int]
    costs: dict[int, int] = field(default_factory=dict)

    def copy(self) -> Zone:
        return Zone(self.numa_id, dict(self.resources), self.costs)


def value(resource: str, amount: int) -> int:
    """Go's Quantity.Value(): cpu rounded up to whole CPUs, every other amount as it is."""
    return -(-amount // 1000) if resource == "cpu" else amount


def is_native(resource: str) -> bool:
    """Kubernetes' own resource names: no domain, or a kubernetes.io one."""
    return "/" not in resource or "kubernetes.io/" in resource


def is_host_level(resource: str) -> bool:
    """Resources that may have no NUMA affinity: storage and every non-native resource."""
    return resource in ("ephemeral-storage", "storage") or not is_native(resource)


def is_numa_affine(resource: str) -> bool:
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def suitable(guaranteed: bool, resource: str, quantity: int, available: int) -> bool:
    """isResourceSetSuitable: a non-Guaranteed pod gets no exclusive CPUs or memory, so those always fit."""
    return (not guaranteed and is_numa_affine(resource)) or available >= quantity


def effective_request(pod: Pod) -> dict[str, int]:
    """GetPodEffectiveRequest: the app containers' sum, raised to any init container's larger request."""
    total: dict[str, int] = {}
    for c in pod.containers:
        for r, q in c.requests.items():
            total[r] = total.get(r, 0) + q
    init: dict[str, int] = {}
    for c in pod.init_containers:
        for r, q in c.requests.items():
            if q > init.get(r, -1):
                init[r] = q
    for r, q in init.items():
        if q > total.get(r, -1):
            total[r] = q
    return total


def _by_name(amounts: Mapping[str, int], keep: bool = True) -> dict[str, int]:
    return {r: amounts[r] for r in sorted(amounts) if keep or not is_memory_resource(r)}


@dataclass(frozen=True)
class ContainerRequest:
    """A container's name, kind and requests (in resource name order, the order the Filter checks them)."""

    name: str
    kind: str
    requests: dict[str, int]


@dataclass(frozen=True)
class PodView:
    """What the plugin reads of a pod, read once: its QoS class, its init and app containers' requests, its
    effective request, and whether it asks for a non-native (extended) resource."""

    qos: str
    init: tuple[ContainerRequest, ...]
    apps: tuple[ContainerRequest, ...]
    effective: dict[str, int]
    non_native: bool

    @classmethod
    def of(cls, pod: Pod, memory: bool = True) -> PodView:
        """`memory` False: the memory and hugepage requests left out (a node whose memory the engine does
        not know, as the resource fit leaves them out there); the QoS class is the pod's all the same."""
        def view(c: Container) -> ContainerRequest:
            return ContainerRequest(c.name, c.kind, _by_name(c.requests, memory))
        return cls(pod.qos_class, tuple(map(view, pod.init_containers)), tuple(map(view, pod.containers)),
                   _by_name(effective_request(pod), memory),
                   any(not is_native(r) for c in pod.all_containers() for r in c.requests))

    @property
    def guaranteed(self) -> bool:
        return self.qos == GUARANTEED

    def in_order(self) -> tuple[ContainerRequest, ...]:
        """Init containers then app containers, the order the Topology Manager asks for hints."""
        return self.init + self.apps


def zones_of(node: Node) -> list[Zone]:
    """The NUMA zones a topology exporter publishes for `node` now: per NUMA node, cpu (the CPUs the
    kubelet may still pin), memory and each hugepage size with a capacity (what the Memory Manager
    has left), and each device resource attached there (free healthy devices); the distances."""
    t = node.topology
    zones = []
    for nid in t.numa_ids:
        res = {"cpu": (t.numa_cpus[nid] & node.free_cpus).bit_count() * 1000}
        numa = t.numa_node(nid)
        for rname, total in [("memory", numa.memory), *sorted(numa.hugepages.items())]:
            if total:
                res[rname] = node.memory_free(nid, rname)
        for rname in t.device_resources():
            devices = [d for d in t.devices_of(rname) if d.numa and nid in d.numa]
            if devices:
                used = node.used_devices
                res[rname] = sum(1 for d in devices if d.healthy and (rname, d.id) not in used)
        row = t.distances[t.numa_ids.index(nid)] if t.distances is not None else ()
        costs = dict(zip(t.numa_ids, row, strict=False))
        zones.append(Zone(nid, res, costs))
    return zones


def node_resources(node: Node) -> frozenset[str]:
    """The resource names the node's allocatable lists (the Filter's first check)."""
    t = node.topology
    names = {"cpu", *t.device_resources()}
    for nid in t.numa_ids:
        numa = t.numa_node(nid)
        if numa.memory:
            names.add("memory")
        names.update(r for r, v in numa.hugepages.items() if v)
    return frozenset(names)


def conf_of(node: Node) -> TopologyManagerConf:
    """What the exporter publishes of the kubelet: its policy, scope and max-allowable-numa-nodes."""
    k = node.kubelet
    most = k.topology_manager_options.max_allowable_numa_nodes
    return TopologyManagerConf(k.topology_manager_policy, k.topology_manager_scope,
                               min(most, 1024) if most > 1 else DEFAULT_MAX_NUMA_NODES)


def states_memory(node: Node) -> bool:
    """Whether the node's topology says how much memory each NUMA node has."""
    return any(node.topology.numa_node(n).memory for n in node.topology.numa_ids)
