"""The cluster a session schedules on (ENGINE.md §4.1): its nodes by name and the scheduler's resource
tally per node (requests against allocatable: the default scheduler's NodeResourcesFit), with snapshots
for a gang's rollback and copies for what-if runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ..errors import RequestError
from ..model.kubelet_config import KubeletConfig
from ..model.node import Node
from ..model.pods import Container, Pod, is_device_resource, pod_level

#: a node's tally as a hashable value: (cpu millicores, memory bytes, ((device resource, count), ...))
TallyKey = tuple[int, int, tuple[tuple[str, int], ...]]

# ------------------------------------------------------------------------------------------------
# Cluster state
# ------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the scheduler has placed on a node (requests, not pinning): cpu millicores, memory bytes,
    devices per resource. Kept separately from the kubelet's allocations, as the scheduler does."""

    cpu_milli: int = 0
    memory: int = 0
    devices: dict[str, int] = field(default_factory=dict)

    def key(self) -> TallyKey:
        return (self.cpu_milli, self.memory, tuple(sorted((r, n) for r, n in self.devices.items() if n)))

    def copy(self) -> Tally:
        return Tally(self.cpu_milli, self.memory, dict(self.devices))


#: what `Cluster.restore` needs to put a node back: a copy of the node and of its tally
Snapshot = tuple[Node, Tally]


def _limit_of(resource: str) -> Callable[[Container], int]:
    def amount(c: Container) -> int:
        return c.limits.get(resource, 0)
    return amount


@dataclass(frozen=True)
class Request:
    """A pod's effective requests (kubelet pod-level aggregation over init, sidecar and app)."""

    cpu_milli: int
    memory: int
    devices: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, pod: Pod) -> Request:
        names = sorted({r for c in pod.all_containers() for r in c.limits if is_device_resource(r)})
        devices = tuple((r, pod_level(pod, _limit_of(r))) for r in names)
        return cls(pod_level(pod, lambda c: c.requests.get("cpu", 0)),
                   pod_level(pod, lambda c: c.requests.get("memory", 0)),
                   tuple((r, n) for r, n in devices if n))


class Cluster:
    """Nodes by name with the per-node state the scheduler needs, kept up to date incrementally:
    the scheduler's request tally, per-NUMA free CPU counts and the id of the node's static shape
    (topology, kubelet settings, whether it publishes a Numatopology)."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            if not isinstance(node, Node):
                raise RequestError(f"a cluster holds Node objects, not {type(node).__name__}")
            if node.name in self.nodes:
                raise RequestError(f"node name {node.name!r} is used twice in the cluster")
            self.nodes[node.name] = node
        self.tally: dict[str, Tally] = {}
        self.numa_free: dict[str, tuple[int, ...]] = {}
        self._static: dict[str, int] = {}
        self._static_ids: dict[tuple[str, KubeletConfig, bool], int] = {}
        self._alloc_cap: dict[str, tuple[int, int, dict[str, int]]] = {}
        for name, node in self.nodes.items():
            t = Tally()
            for a in node.allocations:
                t.cpu_milli += len(a.cpus) * 1000
                for res in a.memory.values():
                    t.memory += res.get("memory", 0)
                for r, ids in a.devices.items():
                    t.devices[r] = t.devices.get(r, 0) + len(ids)
            self.tally[name] = t
            self.numa_free[name] = self._numa_free_of(node)
            skey = (node.topology.fingerprint, node.kubelet, node.numatopology)
            static_id = self._static_ids.setdefault(skey, len(self._static_ids))
            self._static[name] = static_id
            self._alloc_cap[name] = self._capacity(node)

    # -- views -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise RequestError(f"no node named {name!r} in the cluster") from None

    def static_id(self, name: str) -> int:
        """Nodes with the same id have the same topology, kubelet settings and Numatopology flag."""
        return self._static[name]

    @staticmethod
    def _numa_free_of(node: Node) -> tuple[int, ...]:
        free = node.free_cpus
        return tuple((m & free).bit_count() for _n, m in sorted(node.topology.numa_cpus.items()))

    @staticmethod
    def _capacity(node: Node) -> tuple[int, int, dict[str, int]]:
        k = node.kubelet
        reserved = len(k.reserved_cpus) * 1000 if k.reserved_cpus is not None else k.reserved_cpu_milli
        cpu = node.topology.all_cpus.bit_count() * 1000 - reserved
        memory = sum(n.memory for n in node.topology.numa_nodes)
        if memory:
            memory -= sum(r.get("memory", 0) for r in k.reserved_memory.values())
        devices: dict[str, int] = {}
        for d in node.topology.devices:
            if d.healthy:
                devices[d.resource] = devices.get(d.resource, 0) + 1
        return cpu, memory, devices

    def allocatable(self, name: str) -> tuple[int, int, dict[str, int]]:
        """The node's allocatable cpu millicores, memory bytes and healthy devices per resource."""
        return self._alloc_cap[name]

    def fit(self, name: str, req: Request) -> str | None:
        """NodeResourcesFit: None when the requests fit, else `Insufficient <resource>`."""
        cpu, memory, devices = self._alloc_cap[name]
        t = self.tally[name]
        if req.cpu_milli and t.cpu_milli + req.cpu_milli > cpu:
            return "Insufficient cpu"
        if req.memory and memory and t.memory + req.memory > memory:
            return "Insufficient memory"
        for r, n in req.devices:
            if t.devices.get(r, 0) + n > devices.get(r, 0):
                return f"Insufficient {r}"
        return None

    def fit_count(self, name: str, req: Request) -> int:
        """How many more pods of `req` NodeResourcesFit lets onto the node (an upper bound for any
        profile); a request for nothing the node counts is refused outright (0)."""
        cpu, memory, devices = self._alloc_cap[name]
        t = self.tally[name]
        limits = []
        if req.cpu_milli:
            limits.append(max(0, cpu - t.cpu_milli) // req.cpu_milli)
        if req.memory and memory:
            limits.append(max(0, memory - t.memory) // req.memory)
        for r, n in req.devices:
            limits.append(max(0, devices.get(r, 0) - t.devices.get(r, 0)) // n)
        return min(limits) if limits else 0

    # -- changes ---------------------------------------------------------------------------------
    def add_request(self, name: str, req: Request) -> None:
        t = self.tally[name]
        t.cpu_milli += req.cpu_milli
        t.memory += req.memory
        for r, n in req.devices:
            t.devices[r] = t.devices.get(r, 0) + n

    def refresh(self, name: str) -> None:
        """Recompute the cached per-NUMA free counts after the node's allocations changed."""
        self.numa_free[name] = self._numa_free_of(self.nodes[name])

    def release(self, name: str, pod: str) -> None:
        """Release a pod's kubelet allocations on a node (its scheduler tally is the caller's)."""
        self.node(name).release(pod)
        self.refresh(name)

    def snapshot(self, name: str) -> Snapshot:
        """Everything a rollback needs to put the node back exactly."""
        return (self.nodes[name].copy(), self.tally[name].copy())

    def restore(self, name: str, snap: Snapshot) -> None:
        saved, tally = snap
        node = self.nodes[name]
        node.allocations = list(saved.allocations)
        node.free_cpus = saved.free_cpus
        node.used_devices = set(saved.used_devices)
        node.memory_used = {n: dict(r) for n, r in saved.memory_used.items()}
        self.tally[name] = tally
        self.refresh(name)

    def copy(self, names: Iterable[str] | None = None) -> Cluster:
        """An independent cluster of the nodes `names` (default: all), with their scheduler tally;
        node copies share the immutable topologies."""
        names = list(self.nodes) if names is None else [self.node(n).name for n in names]
        other = Cluster.__new__(Cluster)
        other.nodes = {n: self.nodes[n].copy() for n in names}
        other.tally = {n: self.tally[n].copy() for n in names}
        other.numa_free = {n: self.numa_free[n] for n in names}
        other._static = self._static
        other._static_ids = self._static_ids
        other._alloc_cap = self._alloc_cap
        return other

    def to_dict(self) -> dict[str, list[dict[str, object]]]:
        return {"nodes": [n.to_dict() for n in self.nodes.values()]}
