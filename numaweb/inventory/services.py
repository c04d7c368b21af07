"""Inventory rows ↔ engine objects. Every check here is the engine's own (Topology.from_dict,
KubeletConfig, Node.allocate); its EngineError messages reach users unchanged."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from numaweb.jobs import services as jobs
from scheduler_core.errors import EngineError, TopologyError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import DECISION_LABELS
from scheduler_core.model.node import Allocation as EngineAllocation
from scheduler_core.model.node import Node as EngineNode
from scheduler_core.model.topology import Topology

from . import dra
from .models import Allocation, Cluster, Node

if TYPE_CHECKING:  # the formats package is imported when a topology is read
    from scheduler_core.formats import Loaded

KUBELET_FIELDS = ("cpu_manager_policy", "cpu_manager_options", "reserved_cpus", "reserved_cpu_milli",
                  "topology_manager_policy", "topology_manager_scope", "topology_manager_options",
                  "memory_manager_policy", "reserved_memory")

_TOPOLOGY_CACHE: OrderedDict[str, Topology] = OrderedDict()
_KUBELET_CACHE: dict[str, KubeletConfig] = {}
_CACHE_SIZE = 256


# -- topology ------------------------------------------------------------------------------------
def load_topology_data(data: bytes | str | Mapping, fmt: str | None = None) -> Loaded:
    """Parse a topology in any format the engine reads → `scheduler_core.formats.Loaded`
    (`.format`, `.topology`, `.kubelet` when the file states policies, `.allocations`).

    Text is always passed to the engine as bytes, so user input is never taken for a server path."""
    from scheduler_core import formats

    if isinstance(data, Mapping):
        data = json.dumps(data)
    if isinstance(data, str):
        data = data.encode()
    return formats.load(bytes(data), format=fmt or None)


def topology_of(node: Node) -> Topology:
    """The node's engine Topology, cached by fingerprint (thousands of nodes share a few shapes)."""
    return _topology(node.fingerprint, lambda: node.topology)


def _topology(fingerprint: str, document: Callable[[], Mapping]) -> Topology:
    """The Topology of this fingerprint, from the cache or else built from `document()` (read only then)."""
    if fingerprint:
        cached = _TOPOLOGY_CACHE.get(fingerprint)
        if cached is not None:
            _TOPOLOGY_CACHE.move_to_end(fingerprint)
            return cached
    topology = Topology.from_dict(document())
    if fingerprint:
        _TOPOLOGY_CACHE[fingerprint] = topology
        if len(_TOPOLOGY_CACHE) > _CACHE_SIZE:
            _TOPOLOGY_CACHE.popitem(last=False)
    return topology


def set_topology(node: Node, topology: Topology, source_format: str = "json", imported: bool = True,
                 data: dict | None = None) -> None:
    """Store an engine Topology on the row (not saved) with its summary columns (`data`: its
    `to_dict()`, when the caller already has it)."""
    node.topology = data if data is not None else topology.to_dict()
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
    """The node's engine KubeletConfig, shared by every node with the same settings (a pool's nodes):
    parsing and hashing one per node was a tenth of a 5,000-node session's set-up."""
    return _kubelet(kubelet_dict(node))


def _kubelet(data: dict[str, Any]) -> KubeletConfig:
    key = json.dumps(data, sort_keys=True)
    config = _KUBELET_CACHE.get(key)
    if config is None:
        config = KubeletConfig.from_dict(data)  # raises on bad settings: nothing cached
        if len(_KUBELET_CACHE) >= _CACHE_SIZE:
            _KUBELET_CACHE.clear()
        _KUBELET_CACHE[key] = config
    return config


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
    return _allocation(row.pod, row.container, row.cpus, row.memory, row.devices, row.origin)


def _allocation(pod: str, container: str, cpus: str, memory: Mapping | None, devices: Mapping | None,
                origin: str) -> EngineAllocation:
    return EngineAllocation(
        pod=pod,
        container=container or None,
        cpus=CPUSet.parse(cpus or ""),
        memory={int(n): {str(r): int(b) for r, b in res.items()} for n, res in (memory or {}).items()},
        devices={str(r): tuple(ids) for r, ids in (devices or {}).items()},
        origin=origin,
    )


def to_engine(node: Node, allocations: Iterable[Allocation]) -> EngineNode:
    return EngineNode(node.name, topology_of(node), kubelet_of(node),
                      [allocation_to_engine(a) for a in allocations], node.numatopology, decision_labels(node.labels))


def decision_labels(labels: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The labels an engine model decides by (`DECISION_LABELS`; the engine checks their values): the
    others (hostname, zone, ...) stay in the inventory. None when the node has none of them."""
    if not labels:
        return None
    return {k: labels[k] for k in DECISION_LABELS if k in labels} or None


def _decision_labels_text(text: str | None) -> dict[str, Any] | None:
    """`decision_labels` of a stored labels document read as text: decoded only when it names one of
    them (a snapshot's nodes carry a dozen labels or more, and a bulk read of 5,000 nodes should not
    decode them all)."""
    if not text or not any(k in text for k in DECISION_LABELS):
        return None
    return decision_labels(json.loads(text))


_KUBELET_JSON = ("cpu_manager_options", "topology_manager_options", "reserved_memory")


def cluster_nodes(cluster: Cluster) -> tuple[list[EngineNode], dict[str, tuple[int, int]]]:
    """Every node of the cluster as engine nodes, plus `{name: (row id, generation read)}`.

    The generations are what a commit must still find. Nodes a newer snapshot no longer lists
    (`removed_at`) are left out. Raises the first node's error, naming the node."""
    nodes, seen = [], {}
    rows = Node.objects.filter(cluster=cluster, removed_at__isnull=True).order_by("name")
    for (node_id, name, generation), node in engine_nodes(rows):
        if isinstance(node, Exception):
            raise type(node)(f"node {name}: {node}") from node
        nodes.append(node)
        seen[name] = (node_id, generation)
    return nodes, seen


def _stored_topology(pk: int) -> dict[str, Any]:
    topology: dict[str, Any] = Node.objects.values_list("topology", flat=True).get(pk=pk)
    return topology


def engine_nodes(rows: QuerySet[Node], *extra: str) -> Iterator[tuple[tuple, EngineNode | Exception]]:
    """Each row's values (id, name, generation, *extra columns) and its engine node, or the error that
    building it raised (the engine's, or one of a malformed stored document).

    Two queries whatever the number of rows (and one per topology shape not yet cached). Rows are read
    as values, the kubelet settings' JSON as text: nodes of a pool share their settings, which are
    decoded once per distinct text, not once per node.

    The rows, with their generations, are read before the allocations: a write between the two reads then
    shows as a newer generation than the one returned, so a session that planned on these allocations cannot
    commit over it (StaleNodes). Read the other way round, a session could plan on allocations older than
    the generation it holds, and two sessions placed pods on the same CPUs."""
    text = {f"{name}_text": Cast(name, TextField()) for name in (*_KUBELET_JSON, "labels")}
    columns = [f"{name}_text" if name in _KUBELET_JSON else name for name in KUBELET_FIELDS]
    values = list(rows.annotate(**text).values_list("id", "name", "generation", *extra, "fingerprint",
                                                    "numatopology", "labels_text", *columns))
    by_node: dict[int, list[EngineAllocation]] = {}
    for node_id, *allocation in (Allocation.objects.filter(node__in=rows.values("pk")).order_by("id")
                                 .values_list("node_id", "pod", "container", "cpus", "memory", "devices", "origin")):
        by_node.setdefault(node_id, []).append(_allocation(*allocation))
    configs: dict[tuple, KubeletConfig] = {}
    head = 3 + len(extra)
    for row in values:
        node_id, name, fingerprint, numatopology, labels = row[0], row[1], row[head], row[head + 1], row[head + 2]
        settings = row[head + 3:]
        try:
            config = configs.get(settings)
            if config is None:
                data = dict(zip(KUBELET_FIELDS, settings, strict=True))
                for field in _KUBELET_JSON:  # as kubelet_dict reads them from a row
                    data[field] = dict(json.loads(data[field]) or {}) if data[field] is not None else {}
                data["reserved_cpus"] = data["reserved_cpus"] or None
                config = configs[settings] = _kubelet(data)
            topology = _topology(fingerprint, partial(_stored_topology, node_id))
            node: EngineNode | Exception = EngineNode(name, topology, config, by_node.get(node_id, ()), numatopology,
                                                      _decision_labels_text(labels))
        except (EngineError, KeyError, TypeError, ValueError) as exc:
            node = exc
        yield row[:head], node


# -- writes -------------------------------------------------------------------------------------
# Every write to allocations (API, admin, sessions, imports, releases) runs in one transaction that first
# holds the nodes it touches: a row lock (SELECT ... FOR UPDATE) on PostgreSQL; on SQLite every
# transaction begins IMMEDIATE (settings), which takes the database's write lock at BEGIN. The conflict
# check reads inside that transaction, so no two writers can both pass it. Writers hold nodes first, in
# id order, and then jobs, so two of them never wait for each other in a cycle.
class AllocationConflict(Exception):
    """An allocation that cannot be written because something already holds what it asks for.
    `cpus`: the CPUs in dispute; `holders`: the allocations holding them (pod, container, node, CPUs)."""

    def __init__(self, message: str, cpus: str = "", holders: Iterable[Allocation] = ()) -> None:
        super().__init__(message)
        self.cpus = cpus
        self.holders = [{"id": a.pk, "pod": a.pod, "container": a.container, "node": a.node_id, "cpus": a.cpus}
                        for a in holders]


class AllocationRefused(ValueError):
    """An allocation that names something the pod does not have; `field` says which field is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def hold_nodes(node_ids: Iterable[int]) -> dict[int, Node]:
    """Inside a transaction: hold these nodes until it ends (see above); returns them fresh, by id."""
    return {n.pk: n for n in Node.objects.select_for_update().filter(pk__in=set(node_ids)).order_by("pk")}


def _describe(a: Allocation) -> str:
    return f"{a.pod}" + (f" (container {a.container})" if a.container else "")


def check_allocation(row: Allocation, node: Node) -> None:
    """Raise AllocationConflict unless `row` fits on `node` (held by the caller) next to its other
    allocations, and its pod is one pod: its container holds nothing else in the cluster, the pod holds
    nothing on another node, a whole-pod allocation (no container: pod scope) is the pod's only one, and
    when the pod is a job's, the container is one of its pod template's."""
    others = list(node.allocations.exclude(pk=row.pk) if row.pk else node.allocations.all())
    same = Allocation.objects.filter(cluster_id=node.cluster_id, pod=row.pod)
    if row.pk:
        same = same.exclude(pk=row.pk)
    container = row.container or ""
    for a in same.select_related("node"):
        if a.container == container or a.node_id != node.pk:
            where = f"node {a.node.name}"
            raise AllocationConflict(f"pod {_describe(a)} already holds CPUs {a.cpus or '(none)'} on {where}; "
                                     "a pod's container holds one allocation, on one node", a.cpus, [a])
        if not a.container or not container:
            raise AllocationConflict(f"pod {row.pod} already holds {_describe(a)}: a pod holds either one whole-pod "
                                     "allocation (pod scope, no container) or one per container, not both",
                                     a.cpus, [a])
    job = jobs.job_for_pod(row.pod, node.cluster_id)
    if job is not None and container:
        names = jobs.pod_containers(row.pod, job)
        if container not in names:
            raise AllocationRefused("container", f"pod {row.pod} of job {job} has no container {container!r} (its "
                                                 f"containers: {', '.join(sorted(names))})")
    engine = to_engine(node, others)
    try:
        engine.allocate(allocation_to_engine(row))
    except EngineError as exc:
        mask = CPUSet.parse(row.cpus or "").mask
        holders = [a for a in others if CPUSet.parse(a.cpus or "").mask & mask]
        if holders:
            taken = CPUSet(mask & sum(CPUSet.parse(a.cpus).mask for a in holders))
            raise AllocationConflict(f"CPUs {taken} of node {node.name} are held by "
                                     f"{', '.join(_describe(a) for a in holders)}", str(taken), holders) from exc
        reserved = mask & engine.topology.all_cpus & ~engine.free_cpus
        if reserved:
            raise AllocationConflict(f"CPUs {CPUSet(reserved)} of node {node.name} are reserved for the system "
                                     "(reservedSystemCPUs)", str(CPUSet(reserved))) from exc
        wanted = {(r, d) for r, ids in (row.devices or {}).items() for d in ids}
        holders = [a for a in others if wanted & {(r, d) for r, ids in (a.devices or {}).items() for d in ids}]
        if holders:
            raise AllocationConflict(f"{exc}; held by {', '.join(_describe(a) for a in holders)}", "",
                                     holders) from exc
        raise


class NodeMoveRefused(ValueError):
    """A node that holds allocations cannot move to another cluster."""


def check_move(node: Node, cluster: Cluster) -> None:
    """Refuse moving `node` (as stored) to `cluster` while it holds allocations: they, their pods' jobs and
    the one-holder rule all belong to its cluster. Release them (or delete the node) first."""
    if node.cluster_id == cluster.pk:
        return
    held = Allocation.objects.filter(node_id=node.pk).count()
    if held:
        raise NodeMoveRefused(f"node {node.name} holds {held} allocation(s) in cluster {node.cluster}; a node moves "
                              f"to cluster {cluster} only once it holds none (release them, or delete the node)")


def add_allocation(node: Node, **fields: Any) -> Allocation:
    """Record an allocation if it fits (no CPU or device held twice, one allocation per pod container),
    with the node held from the check to the write; the pod's job, if any, has its status re-derived."""
    try:
        with transaction.atomic():
            # the cluster first (as a snapshot import does), so two writers of one pod on two nodes take turns
            Cluster.objects.select_for_update().filter(pk=node.cluster_id).first()
            locked = hold_nodes([node.pk]).get(node.pk)
            if locked is None:
                raise AllocationConflict(f"node {node.pk} no longer exists")
            row = Allocation(node=locked, cluster_id=locked.cluster_id, **fields)
            check_allocation(row, locked)
            row.job = jobs.job_for_pod(row.pod, locked.cluster_id)
            row.save()  # the post_save signal advances the node's generation
            jobs.refresh_status([row.job_id])
    except IntegrityError as exc:  # the (cluster, pod, container) constraint: a writer on another node won
        raise AllocationConflict(f"pod {fields.get('pod')} container {fields.get('container') or '(pod)'} "
                                 "already holds an allocation in this cluster") from exc
    return row


def remove_allocation(row: Allocation) -> None:
    """Delete one allocation with its node held; its job's status is re-derived."""
    with transaction.atomic():
        hold_nodes([row.node_id])
        Allocation.objects.filter(pk=row.pk).delete()  # the post_delete signal advances the node's generation
        jobs.refresh_status([row.job_id])


def release(rows: QuerySet[Allocation]) -> int:
    """Delete these allocations (the caller holds their nodes, inside its transaction) and advance the
    generation of every node that lost one; returns how many were deleted."""
    nodes = set(rows.values_list("node_id", flat=True))
    count, _ = rows.model.objects.filter(pk__in=list(rows.values_list("pk", flat=True))).delete()
    Node.objects.filter(pk__in=nodes).advance()
    return count


def import_node(cluster: Cluster, name: str, data: bytes | str | Mapping, fmt: str | None = None,
                kubelet: Mapping[str, Any] | None = None) -> Node:
    """Create or replace a node's topology from a file's content, in one transaction holding the node.
    The returned node's `import_notes` say how its pods were named and linked to jobs: a pod a kubelet
    state file names by UID only is named `namespace/name` from the node's last snapshot when it lists it.

    Kubelet settings: the node's current ones (or static CPU Manager for a new node), then what the
    file states (NRT/Numatopology policies), then `kubelet` overrides. Allocations the file holds
    (Numatopology, kubelet state) replace the node's imported ones. Everything must still fit, and no
    imported pod may hold resources on another node of the cluster, else nothing changes."""
    return import_loaded(cluster, name, load_topology_data(data, fmt), kubelet)


def import_loaded(cluster: Cluster, name: str, loaded: Loaded, kubelet: Mapping[str, Any] | None = None) -> Node:
    """`import_node` for a file already read (`load_topology_data`): the write alone, so a caller can read
    and check the file first (the API's validation) and write later."""
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
        named = dict((node.snapshot or {}).get("pods") or {}) if node.pk else {}
        new = [Allocation(pod=named.get(a.pod, a.pod), container=a.container or "", cpus=str(a.cpus),
                          memory={str(n): dict(r) for n, r in a.memory.items()},
                          devices={r: list(ids) for r, ids in a.devices.items()}, origin=Allocation.IMPORTED)
               for a in loaded.allocations]
        notes = _naming_notes(loaded.allocations, named)
        keep, dropped = _replaced_by(node, new)
        _check_imported(cluster, node, keep, new)
        node.save()  # a stored node's generation advances
        if new:
            notes.extend(_write_imported(cluster, node, dropped, new))
            dra.realign(node, loaded.topology)
        node.refresh_from_db()
        node.import_notes = notes
    return node


def _replaced_by(node: Node, new: list[Allocation]) -> tuple[list[Allocation], list[Allocation]]:
    """The node's allocations kept and dropped when a file holds `new` ones: the file's pinning replaces
    the last file's, and the replay's guess for its pods (none holds: everything is kept)."""
    keep = list(node.allocations.all()) if node.pk else []
    if not new:
        return keep, []
    listed = {a.pod for a in new}
    dropped = [a for a in keep if a.origin == Allocation.IMPORTED
               or (a.origin == Allocation.REPLAYED and a.pod in listed)]
    gone = {a.pk for a in dropped}
    return [a for a in keep if a.pk not in gone], dropped


def _check_imported(cluster: Cluster, node: Node, keep: list[Allocation], new: list[Allocation]) -> None:
    """Everything fits on the node, no pod is listed twice, and no imported pod holds resources on another
    node of the cluster (AllocationConflict otherwise)."""
    to_engine(node, [*keep, *new])
    seen = {(a.pod, a.container) for a in keep}
    for a in new:
        if (a.pod, a.container) in seen:
            raise AllocationConflict(f"pod {_describe(a)} is listed twice (or already holds CPUs on this node)")
        seen.add((a.pod, a.container))
    elsewhere = Allocation.objects.filter(cluster=cluster, pod__in=sorted({a.pod for a in new}))
    if node.pk:
        elsewhere = elsewhere.exclude(node=node)
    clash = elsewhere.select_related("node").first()
    if clash is not None:
        raise AllocationConflict(f"pod {_describe(clash)} of this file already holds CPUs {clash.cpus or '(none)'} "
                                 f"on node {clash.node.name}; a pod runs on one node", clash.cpus, [clash])


def _write_imported(cluster: Cluster, node: Node, dropped: list[Allocation], new: list[Allocation]) -> list[str]:
    """The file's allocations in place of the dropped ones, each linked to its job (a note says how many
    were); the jobs' statuses follow."""
    Allocation.objects.filter(pk__in=[a.pk for a in dropped]).delete()
    for a in new:
        a.node, a.cluster, a.job = node, cluster, jobs.job_for_pod(a.pod, cluster)
    Allocation.objects.bulk_create(new)
    pods = {a.pod for a in new if a.job is not None}
    jobs.refresh_status({a.job_id for a in [*dropped, *new]})
    return [f"{len(pods)} pod(s) linked to their jobs by (namespace, pod name)"] if pods else []


def _naming_notes(allocations: Iterable[EngineAllocation], named: Mapping[str, str]) -> list[str]:
    """What an import says about its pods' names: a kubelet state file knows pods by UID only; the node's
    last snapshot (its running pods' `metadata.uid`) names them, so they can be linked to their jobs."""
    uids = sorted({a.pod for a in allocations if "/" not in a.pod})
    found = [u for u in uids if u in named]
    unknown = [u for u in uids if u not in named]
    notes = []
    if found:
        notes.append(f"{len(found)} pod(s) named from their UID by the cluster's last snapshot (e.g. {found[0]} is "
                     f"{named[found[0]]})")
    if unknown:
        notes.append(f"{len(unknown)} pod(s) are known only by their UID (e.g. {unknown[0]}): the file does not name "
                     "them and the cluster's last snapshot does not list them on this node, so they are not linked "
                     "to jobs; import a snapshot of the cluster first to name them")
    return notes


def topology_error(exc: Exception) -> str:
    """The user-facing text of an engine error (or a generic one for anything else)."""
    if isinstance(exc, EngineError):
        return str(exc)
    if isinstance(exc, (TypeError, KeyError)):
        return f"malformed topology: {exc}"
    return str(exc)


__all__ = [
    "AllocationConflict", "AllocationRefused", "NodeMoveRefused", "TopologyError", "add_allocation",
    "allocation_to_engine", "check_allocation", "check_move", "cluster_nodes", "engine_nodes", "hold_nodes",
    "import_loaded", "import_node", "kubelet_dict", "kubelet_of", "load_topology_data",
    "release", "remove_allocation", "set_kubelet", "set_topology", "to_engine", "topology_of", "validate_node",
]
