"""The scheduler-cache side of Volcano's numa-aware scheduling: what the next session sees of a node.

The cache keeps, per node, the view converted from its Numatopology object (`NumaInfo`) and the
pods Volcano placed there whose CPUs the exporter has not reported yet ("unassigned NUMA pods",
handed over by the plugin's session close). At every snapshot the scheduler's view is the CRD's
minus *all* those pods' simulated CPUs, until every one of them shows up in the CRD's
`podAllocations` (or is deleted); then the list is cleared and the CRD view is used as is.
See ENGINE.md §3.8.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol, TypedDict

from ..errors import EngineError
from ..model.cpuset import CPUSet
from ..model.node import Node
from ..model.quantity import parse_quantity
from .numaaware import CloseEntry

#: the only resource names a Numatopology's resReserved may hold
RESERVABLE = ("cpu", "memory", "ephemeral-storage")


class NumaResEntry(TypedDict, total=False):
    allocatable: str
    capacity: int | str


class CPUInfo(TypedDict, total=False):
    numa: int | str
    socket: int | str
    core: int | str


class NumatopoSpec(TypedDict, total=False):
    """The fields of a Numatopology object's `spec` the cache converts (parsed JSON or YAML)."""

    policies: Mapping[str, str]
    numares: Mapping[str, NumaResEntry]
    cpuDetail: Mapping[str, CPUInfo | None]
    resReserved: Mapping[str, object]


class HasNodes(Protocol):
    """What the cache reads of a cluster (the scheduler's `Cluster`, which volcano/ does not import)."""

    @property
    def nodes(self) -> Mapping[str, Node]: ...


class PodMeta(NamedTuple):
    uid: str
    name: str
    namespace: str


@dataclass(frozen=True)
class NumaInfo:
    """A node's Numatopology as the cache converts it: policies, per resource (allocatable CPU mask,
    capacity), per-CPU (numa, socket, core), the reserved quantities (None = none given; {} = an
    invalid map, which reserves nothing) and the pods the exporter reports as pinned."""

    policies: Mapping[str, str] = field(default_factory=dict)
    numares: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    cpu_detail: Mapping[int, tuple[int, int, int]] = field(default_factory=dict)
    res_reserved: Mapping[str, str] | None = None
    pod_allocations: tuple[PodMeta, ...] = ()

    @classmethod
    def of_node(cls, node: Node) -> NumaInfo:
        """What the resource exporter publishes for an engine `Node`: the CPUs the kubelet has not pinned
        as allocatable, and every pod holding an allocation there as pinned."""
        pods: dict[str, PodMeta] = {}
        for a in node.allocations:
            namespace, _, name = a.pod.rpartition("/")
            pods.setdefault(a.pod, PodMeta(a.pod, name, namespace or "default"))
        allocatable = node.free_cpus | node.reserved_cpus.mask
        return cls(numares={"cpu": (allocatable, node.topology.all_cpus.bit_count())},
                   pod_allocations=tuple(pods.values()))

    @classmethod
    def from_crd(cls, spec: NumatopoSpec, pod_allocations: Iterable[PodMeta] = ()) -> NumaInfo:
        """The conversion upstream's event handler does, leniencies included: an allocatable that is
        not a valid cpuset becomes empty; missing numa/socket/core are 0; a resReserved with an unknown
        key or a bad or negative quantity reserves nothing."""
        numares: dict[str, tuple[int, int]] = {}
        for res, entry in (spec.get("numares") or {}).items():
            try:
                allocatable = CPUSet.parse(str(entry.get("allocatable") or "")).mask
            except EngineError:
                allocatable = 0
            numares[str(res)] = (allocatable, int(entry.get("capacity") or 0))
        detail: dict[int, tuple[int, int, int]] = {}
        for key, given in (spec.get("cpuDetail") or {}).items():
            info: CPUInfo = given or {}
            detail[_atoi(key)] = (int(info.get("numa", 0)), int(info.get("socket", 0)), int(info.get("core", 0)))
        return cls(dict(spec.get("policies") or {}), numares, detail, _reserved(spec.get("resReserved")),
                   tuple(pod_allocations))

    def minus(self, resources: Mapping[str, int]) -> NumaInfo:
        """`NumatopoInfo.Allocate`: each resource's allocatable loses the given CPUs (a resource the
        CRD does not list is ignored; upstream would crash on it)."""
        numares = dict(self.numares)
        for res, cpus in resources.items():
            if res not in numares:
                continue
            allocatable, capacity = numares[res]
            numares[res] = (allocatable & ~cpus, capacity)
        return replace(self, numares=numares)


def _atoi(key: object) -> int:
    """Go's strconv.Atoi with the error ignored: anything that is not an integer becomes CPU 0."""
    try:
        return int(str(key))
    except ValueError:
        return 0


def _reserved(values: Mapping[str, object] | None) -> dict[str, str] | None:
    if not values:
        return None
    try:
        for res, quantity in values.items():
            if res not in RESERVABLE:
                return {}
            parse_quantity(quantity, f"resReserved.{res}")
    except EngineError:
        return {}
    return {str(r): str(q) for r, q in values.items()}


def check_numa_pod_assigned(pod_allocations: Iterable[PodMeta], pod: PodMeta) -> bool:
    """The exporter reports the pod as pinned: same UID, or same name and namespace."""
    return any(p.uid == pod.uid or (p.name == pod.name and p.namespace == pod.namespace) for p in pod_allocations)


@dataclass
class _CachedNode:
    numa_info: NumaInfo | None
    #: pod -> simulated resources (CPU masks by resource); None once cleared
    unassigned: dict[PodMeta, dict[str, int]] | None = None


class NumaCache:
    """The NUMA part of Volcano's scheduler cache for a set of nodes."""

    def __init__(self, nodes: Mapping[str, NumaInfo | None] | None = None) -> None:
        self.nodes: dict[str, _CachedNode] = {n: _CachedNode(info) for n, info in (nodes or {}).items()}

    @classmethod
    def of_cluster(cls, cluster: HasNodes) -> NumaCache:
        """A cache whose views are what every node's exporter publishes now (nodes without a
        Numatopology have none)."""
        return cls({name: NumaInfo.of_node(node) if node.numatopology else None
                    for name, node in cluster.nodes.items()})

    def republish(self, cluster: HasNodes) -> None:
        """Every node's exporter publishes again (after the kubelet pinned what it admitted)."""
        for name, node in cluster.nodes.items():
            self.set_numa_info(name, NumaInfo.of_node(node) if node.numatopology else None)

    def set_numa_info(self, node: str, info: NumaInfo | None) -> None:
        """A Numatopology add/update (or delete, with None) replaces the node's view wholesale."""
        self.nodes.setdefault(node, _CachedNode(None)).numa_info = info

    def unassigned(self, node: str) -> dict[PodMeta, dict[str, int]] | None:
        return self.nodes[node].unassigned

    def add_unassigned_numa_pods(self, allocated: Iterable[tuple[PodMeta, str, Mapping[str, int]]]) -> None:
        """What the plugin's session close hands over: (pod, node, resources); a pod sent again
        overwrites its entry; nodes the cache does not know are skipped."""
        for pod, node, resources in allocated:
            cached = self.nodes.get(node)
            if cached is None:
                continue
            if cached.unassigned is None:
                cached.unassigned = {}
            cached.unassigned[pod] = dict(resources)

    def add_session_close(self, close: Iterable[CloseEntry]) -> None:
        """`add_unassigned_numa_pods` from `VolcanoPlugin.close()` / `SessionResult.volcano_close`."""
        self.add_unassigned_numa_pods((PodMeta(**e["pod_meta"]), e["node"], {"cpu": e["cpus"]}) for e in close)

    def refresh(self, node: str) -> NumaInfo | None:
        """RefreshNumaSchedulerInfoByCrd: the view a new session sees of the node."""
        cached = self.nodes[node]
        info = cached.numa_info
        if info is None:
            return None
        entries = cached.unassigned or {}
        if not any(not check_numa_pod_assigned(info.pod_allocations, pod) for pod in entries):
            cached.unassigned = None
            return info
        view = info
        for resources in entries.values():
            view = view.minus(resources)
        return view

    def delete_pod(self, pod: PodMeta, node_name: str = "", job_task_node_name: str | None = None) -> None:
        """A deleted pod leaves the node its job task was bound to (else the pod's own node)."""
        cached = self.nodes.get(job_task_node_name or node_name)
        if cached is not None and cached.unassigned:
            cached.unassigned.pop(pod, None)
