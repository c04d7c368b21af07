"""Inventory rows ↔ engine objects. Every check here is the engine's own (Topology.from_dict,
KubeletConfig, Node.allocate); its EngineError messages reach users unchanged."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from scheduler_core.cpuset import CPUSet
from scheduler_core.errors import EngineError, TopologyError
from scheduler_core.kubelet import KubeletConfig
from scheduler_core.node import Allocation as EngineAllocation
from scheduler_core.node import Node as EngineNode
from scheduler_core.topology import Topology

from .models import Allocation, Cluster, Node

KUBELET_FIELDS = ("cpu_manager_policy", "cpu_manager_options", "reserved_cpus", "reserved_cpu_milli",
                  "topology_manager_policy", "topology_manager_scope", "topology_manager_options",
                  "memory_manager_policy", "reserved_memory")

_TOPOLOGY_CACHE: OrderedDict[str, Topology] = OrderedDict()
_CACHE_SIZE = 256


# -- topology ------------------------------------------------------------------------------------
def load_topology_data(data: bytes | str | Mapping, fmt: str | None = None):
    """Parse a topology in any format the engine reads → `scheduler_core.formats.Loaded`
    (`.format`, `.topology`, `.kubelet` when the file states policies, `.allocations`).

    Text is always passed to the engine as bytes, so user input is never taken for a server path."""
    from scheduler_core import formats

    if isinstance(data, Mapping):
        import json

        data = json.dumps(data)
    if isinstance(data, str):
        data = data.encode()
    return formats.load(bytes(data), format=fmt or None)


def topology_of(node: Node) -> Topology:
    """The node's engine Topology, cached by fingerprint (thousands of nodes share a few shapes)."""
    key = node.fingerprint
    if key:
        cached = _TOPOLOGY_CACHE.get(key)
        if cached is not None:
            _TOPOLOGY_CACHE.move_to_end(key)
            return cached
    topology = Topology.from_dict(node.topology)
    if key:
        _TOPOLOGY_CACHE[key] = topology
        if len(_TOPOLOGY_CACHE) > _CACHE_SIZE:
            _TOPOLOGY_CACHE.popitem(last=False)
    return topology


def set_topology(node: Node, topology: Topology, source_format: str = "json", imported: bool = True) -> None:
    """Store an engine Topology on the row (not saved) with its summary columns."""
    node.topology = topology.to_dict()
    node.num_cpus = len(topology.cpus)
    node.num_numa_nodes = len(topology.numa_ids)
    node.num_sockets = topology.header.num_sockets
    node.fingerprint = topology.fingerprint
    node.source_format = source_format
    if imported:
        node.imported_at = timezone.now()


def kubelet_dict(node: Node) -> dict[str, Any]:
    return {
        "cpu_manager_policy": node.cpu_manager_policy,
        "cpu_manager_options": dict(node.cpu_manager_options or {}),
        "reserved_cpus": node.reserved_cpus or None,
        "reserved_cpu_milli": node.reserved_cpu_milli,
        "topology_manager_policy": node.topology_manager_policy,
        "topology_manager_scope": node.topology_manager_scope,
        "topology_manager_options": dict(node.topology_manager_options or {}),
        "memory_manager_policy": node.memory_manager_policy,
        "reserved_memory": dict(node.reserved_memory or {}),
    }


def kubelet_of(node: Node) -> KubeletConfig:
    return KubeletConfig.from_dict(kubelet_dict(node))


def set_kubelet(node: Node, config: KubeletConfig) -> None:
    data = config.to_dict()
    for name in KUBELET_FIELDS:
        value = data[name]
        if name == "reserved_cpus":
            value = value or ""
        setattr(node, name, value)


def validate_node(node: Node) -> EngineNode:
    """Build the engine node from the row and its stored allocations: raises the engine's error if
    the topology, the kubelet settings or an allocation does not fit."""
    return to_engine(node, node.allocations.all() if node.pk else ())


# -- rows → engine -----------------------------------------------------------------------------
def allocation_to_engine(row: Allocation) -> EngineAllocation:
    return EngineAllocation(
        pod=row.pod,
        container=row.container or None,
        cpus=CPUSet.parse(row.cpus or ""),
        memory={int(n): {str(r): int(b) for r, b in res.items()} for n, res in (row.memory or {}).items()},
        devices={str(r): tuple(ids) for r, ids in (row.devices or {}).items()},
        origin=row.origin,
    )


def to_engine(node: Node, allocations: Iterable[Allocation]) -> EngineNode:
    return EngineNode(node.name, topology_of(node), kubelet_of(node),
                      [allocation_to_engine(a) for a in allocations], node.numatopology)


def cluster_nodes(cluster: Cluster) -> tuple[list[EngineNode], dict[str, tuple[int, int]]]:
    """Every node of the cluster as engine nodes, plus `{name: (row id, generation read)}`.

    Two queries whatever the cluster size; the generations are what a commit must still find. Nodes a
    newer snapshot no longer lists (`removed_at`) are left out."""
    rows = list(Node.objects.filter(cluster=cluster, removed_at__isnull=True).order_by("name"))
    by_node: dict[int, list[Allocation]] = {}
    for alloc in Allocation.objects.filter(node__cluster=cluster, node__removed_at__isnull=True).order_by("id"):
        by_node.setdefault(alloc.node_id, []).append(alloc)
    nodes, seen = [], {}
    for row in rows:
        try:
            nodes.append(to_engine(row, by_node.get(row.id, ())))
        except EngineError as exc:
            raise type(exc)(f"node {row.name}: {exc}") from exc
        seen[row.name] = (row.id, row.generation)
    return nodes, seen


# -- writes -------------------------------------------------------------------------------------
def import_node(cluster: Cluster, name: str, data: bytes | str | Mapping, fmt: str | None = None,
                kubelet: Mapping[str, Any] | None = None) -> Node:
    """Create or replace a node's topology from a file's content, in one transaction.

    Kubelet settings: the node's current ones (or static CPU Manager for a new node), then what the
    file states (NRT/Numatopology policies), then `kubelet` overrides. Allocations the file holds
    (Numatopology) replace the node's imported ones. Everything must still fit, else nothing changes."""
    loaded = load_topology_data(data, fmt)
    with transaction.atomic():
        node = Node.objects.select_for_update().filter(cluster=cluster, name=name).first()
        if node is None:
            node = Node(cluster=cluster, name=name)
        settings = kubelet_dict(node) if node.pk else {**kubelet_dict(node), "cpu_manager_policy": "static"}
        if loaded.kubelet is not None:
            settings.update(loaded.kubelet.to_dict())
        settings.update(kubelet or {})
        set_kubelet(node, KubeletConfig.from_dict(settings))
        set_topology(node, loaded.topology, loaded.format)
        keep = list(node.allocations.all()) if node.pk else []
        if loaded.allocations:
            keep = [a for a in keep if a.origin != Allocation.IMPORTED]
        new = [Allocation(pod=a.pod, container=a.container or "", cpus=str(a.cpus),
                          memory={str(n): dict(r) for n, r in a.memory.items()},
                          devices={r: list(ids) for r, ids in a.devices.items()}, origin=Allocation.IMPORTED)
               for a in loaded.allocations]
        to_engine(node, [*keep, *new])
        if node.pk:
            node.generation = F("generation") + 1
        node.save()
        if loaded.allocations:
            node.allocations.filter(origin=Allocation.IMPORTED).delete()
            for a in new:
                a.node = node
            Allocation.objects.bulk_create(new)
        node.refresh_from_db()
    return node


def add_allocation(node: Node, **fields: Any) -> Allocation:
    """Record an allocation after the engine checked it fits (no CPU or device held twice)."""
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(pk=node.pk)
        row = Allocation(node=locked, **fields)
        engine = to_engine(locked, locked.allocations.all())
        engine.allocate(allocation_to_engine(row))
        row.save()  # the post_save signal advances the node's generation
    return row


def remove_allocation(row: Allocation) -> None:
    row.delete()  # the post_delete signal advances the node's generation


def topology_error(exc: Exception) -> str:
    """The user-facing text of an engine error (or a generic one for anything else)."""
    if isinstance(exc, EngineError):
        return str(exc)
    if isinstance(exc, (TypeError, KeyError)):
        return f"malformed topology: {exc}"
    return str(exc)


__all__ = [
    "TopologyError", "add_allocation", "allocation_to_engine", "cluster_nodes", "import_node", "kubelet_dict",
    "kubelet_of", "load_topology_data", "remove_allocation", "set_kubelet", "set_topology", "to_engine",
    "topology_of", "validate_node",
]
