"""A kubectl cluster snapshot into one cluster (parsing is the engine's: `scheduler_core.formats.snapshot`).

In one transaction: nodes are created or updated (generation bumped only when something changed),
the running pods of each node are replayed in creation order through the engine's kubelet model and
stored as `replayed` allocations, what NRT says is still available per NUMA node is checked against
the replay, pending Volcano Jobs and pods become jobs of the cluster, and the pods the kubelet rejected
are kept, explained and given remedies (`inventory.rejected`). Importing the same snapshot
again changes nothing; the returned report says what changed and every disagreement found.

An import cannot destroy by accident: a snapshot that lists no node (an empty file, `items: []`, only
pods) is refused unless `allow_empty`; nodes the snapshot no longer lists are only reported, and
flagged `removed_at` (their replayed pods released) only with `prune`; `dry_run` computes the same
report from reads alone: no transaction, no lock, no write (on SQLite, whose transactions take the write lock
at BEGIN, a preview held every other writer back for as long as it took), so what it reports is the cluster
as it was read, node by node."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from django.db import transaction
from django.utils import timezone

from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.progress import bar_over
from scheduler_core.errors import EngineError
from scheduler_core.formats.snapshot import Snapshot, SnapshotNode, load_snapshot
from scheduler_core.kubelet.state_check import replay
from scheduler_core.model.node import Node as EngineNode

from . import dra, rejected, services
from .models import Allocation, Cluster, Node, NodeReport


class EmptySnapshot(ValueError):
    """The snapshot lists no node; importing it is refused unless asked for (`allow_empty`)."""


EMPTY = ("the snapshot lists no node (an empty file, `items: []`, or only pods and jobs; a failed `kubectl get` "
         "leaves such a file): nothing was imported and cluster {cluster} is as it was. To import it all the same, "
         "allow an empty snapshot (import_cluster --allow-empty, API allow_empty=true)")


def parse(data: bytes | str) -> Snapshot:
    """The engine's snapshot reader; text goes in as bytes so it is never taken for a server path."""
    return load_snapshot(data.encode() if isinstance(data, str) else bytes(data))


def _alloc_key(a: Allocation) -> tuple[str, str, str, str, str]:
    memory = {str(n): dict(sorted(r.items())) for n, r in sorted((a.memory or {}).items(), key=lambda kv: str(kv[0]))}
    devices = {r: sorted(ids) for r, ids in sorted((a.devices or {}).items())}
    return (a.pod, a.container or "", str(a.cpus), repr(memory), repr(devices))


def _availability(node: SnapshotNode, engine: EngineNode) -> list[str]:
    """Where the NRT's `available` per NUMA node disagrees with the replay's free CPUs and memory."""
    out = []
    free_cpus = engine.free_cpus_per_numa()
    for nid, res in sorted(node.available.items()):
        if "cpu" in res and nid in free_cpus and res["cpu"] != free_cpus[nid]:
            out.append(f"NUMA {nid}: the NodeResourceTopology says {res['cpu']} CPUs available, the replay leaves "
                       f"{free_cpus[nid]}")
        if engine.kubelet.static_memory and "memory" in res and nid in free_cpus:
            free = engine.memory_free(nid, "memory")
            if res["memory"] != free:
                out.append(f"NUMA {nid}: the NodeResourceTopology says {res['memory']} bytes of memory available, "
                           f"the replay leaves {free}")
    return out


class ImportReport(TypedDict):
    """What an import changed and every disagreement it found (kept on the cluster as `last_import`, with
    `changed` added)."""

    dry_run: bool
    pruned: bool
    nodes_added: list[str]
    nodes_updated: dict[str, list[str]]
    nodes_unchanged: int
    nodes_removed: list[str]
    nodes_missing: list[str]
    nodes_returned: list[str]
    allocations_replayed: int
    allocations_dropped: int
    allocations_changed: list[str]
    scheduled_dropped: list[str]
    disagreements: list[str]
    jobs_added: list[str]
    jobs_updated: list[str]
    jobs_kept: list[str]
    rejected_pods: rejected.RejectedReport | None
    dra: dra.DraReport | None
    notes: list[str]


#: what makes a node row "changed": topology, kubelet settings, labels, source, capacity (the snapshot part)
_Fingerprint = tuple[str, dict[str, Any], dict[str, str], tuple[str, bool], dict[str, Any]]
_FINGERPRINT_LABELS = ("topology", "kubelet", "labels", "source", "capacity")


def _fingerprint(row: Node) -> _Fingerprint:
    return (row.fingerprint, services.kubelet_dict(row), dict(row.labels or {}),
            (row.source_format, row.numatopology), dict(row.snapshot or {}))


@dataclass
class _Import:
    """One import's state while its transaction is open: the cluster's rows as they were, and the
    allocation writes collected for the end (every deletion is done before any insert: a pod may move
    nodes)."""

    cluster: Cluster
    snap: Snapshot
    report: ImportReport
    now: datetime
    existing: dict[str, Node]  # the cluster's nodes by name, held (locked) until the end
    allocs: dict[int, list[Allocation]]  # their allocations by node id
    running: set[str] = field(default_factory=set)  # "namespace/name" of the pods running on a listed node
    drop: list[int] = field(default_factory=list)
    inserts: list[tuple[Node, Allocation]] = field(default_factory=list)
    new_rows: list[tuple[Node, list[Allocation]]] = field(default_factory=list)
    topologies: dict[int, dict[str, Any]] = field(default_factory=dict)  # one shape's Topology serialised once
    reported: set[int] = field(default_factory=set)  # ids of the nodes a node agent reports (its truth wins)
    engines: dict[str, EngineNode] = field(default_factory=dict)  # each listed node as the import leaves it
    write: bool = True  # False: a dry run, which reads only


def import_snapshot(cluster: Cluster, data: bytes | str, *, prune: bool = False, allow_empty: bool = False,
                    dry_run: bool = False, progress: bool = False) -> dict[str, Any]:
    """Create or update `cluster` from a snapshot; returns the report (also kept on the cluster, unless
    `dry_run`: then nothing at all is changed). Raises EmptySnapshot for a snapshot without nodes unless
    `allow_empty`; removes nodes the snapshot no longer lists only with `prune`. `progress`: a bar over the
    nodes on a terminal (the management command)."""
    snap = parse(data)
    if not snap.nodes and not allow_empty:
        raise EmptySnapshot(EMPTY.format(cluster=cluster.name))
    report = ImportReport(dry_run=dry_run, pruned=prune, nodes_added=[], nodes_updated={}, nodes_unchanged=0,
                          nodes_removed=[], nodes_missing=[], nodes_returned=[], allocations_replayed=0,
                          allocations_dropped=0, allocations_changed=[], scheduled_dropped=[], disagreements=[],
                          jobs_added=[], jobs_updated=[], jobs_kept=[], rejected_pods=None, dra=None,
                          notes=list(snap.notes))
    if dry_run:  # the preview: reads only, outside any transaction (no write lock, no row lock)
        return _run(cluster, snap, report, prune, progress, write=False)[0]
    # what a session reads its DRA state from: read again only when there is any (a second parse of the text)
    items = dra.source_items(data) if not snap.dra.is_empty() else []
    with transaction.atomic():
        summary, now = _run(cluster, snap, report, prune, progress, write=True)
        if dra.keep_source(cluster, items) and report["dra"] is not None:
            summary["dra"]["changed"] = summary["changed"] = True
        budgets = [{"name": b.name, "allowed": b.allowed, "pods": sorted(b.pods)} for b in snap.budgets]
        Cluster.objects.filter(pk=cluster.pk).update(source=Cluster.SNAPSHOT, imported_at=now, last_import=summary,
                                                     disruption_budgets=budgets)
    return summary


def _run(cluster: Cluster, snap: Snapshot, report: ImportReport, prune: bool, progress: bool,
         write: bool) -> tuple[dict[str, Any], datetime]:
    """The import's steps, writing only when `write`; the summary and the import's time."""
    run = _start(cluster, snap, report, write)
    for name, snode in bar_over(snap.nodes.items(), len(snap.nodes), "nodes", progress):
        _import_node(run, name, snode)
    _leave_unlisted(run, prune)
    _write_allocations(run)
    _store_dra(run)
    if write:  # the rows as written (their generations), else as they would be
        rows = {n.name: n for n in Node.objects.filter(cluster=cluster, name__in=list(run.engines))
                .only("pk", "name", "generation")}
    else:
        rows = {**run.existing, **{row.name: row for row, _replayed in run.new_rows}}
    report["rejected_pods"] = rejected.store(cluster, snap, run.engines, rows, write=write)
    _import_jobs(cluster, snap, report, write)
    if write:
        job_services.link_allocations(cluster)
    if cluster.pk is not None:
        report["notes"].extend(_copies(cluster, run.running))
    summary: dict[str, Any] = dict(report)
    gone = report["rejected_pods"]
    summary["changed"] = bool(report["nodes_added"] or report["nodes_updated"] or report["nodes_removed"]
                              or report["jobs_added"] or report["jobs_updated"]
                              or (report["dra"] is not None and report["dra"]["changed"])
                              or (gone and (gone["added"] or gone["updated"] or gone["removed"])))
    return summary, run.now


def _start(cluster: Cluster, snap: Snapshot, report: ImportReport, write: bool) -> _Import:
    """Lock the cluster and hold its nodes (in id order, as every allocation writer does) until the end; a dry
    run only reads them (a cluster not created yet, which a preview may name, has none)."""
    running = {f"{p.namespace}/{p.name}" for p in snap.pods if p.phase == "Running" and p.node in snap.nodes}
    if cluster.pk is None:
        return _Import(cluster, snap, report, timezone.now(), {}, {}, running, write=write)
    if write:
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
        nodes = list(services.hold_nodes(Node.objects.filter(cluster=cluster).values_list("pk", flat=True)).values())
    else:
        nodes = list(Node.objects.filter(cluster=cluster).order_by("pk"))
    existing = {n.name: n for n in nodes}
    allocs: dict[int, list[Allocation]] = {}
    for a in Allocation.objects.filter(node__cluster=cluster).order_by("id"):
        allocs.setdefault(a.node_id, []).append(a)
    reported = set(NodeReport.objects.filter(node__cluster=cluster).values_list("node_id", flat=True))
    return _Import(cluster, snap, report, timezone.now(), existing, allocs, running, write=write, reported=reported)


def _import_node(run: _Import, name: str, snode: SnapshotNode) -> None:
    """One listed node: its row described by the snapshot, its running pods replayed, its scheduled
    allocations kept where they still fit; a new row waits for the bulk insert, a changed one is saved."""
    report, existing = run.report, run.existing.get(name)
    row = existing if existing is not None else Node(cluster=run.cluster, name=name)
    before = _fingerprint(row) if existing is not None else None
    _describe(run, row, snode)
    returned = existing is not None and row.removed_at is not None
    row.removed_at = None
    old = run.allocs.get(row.pk, []) if existing is not None else []
    # replay the node's running pods, in creation order, on a node without allocations; on a node an agent
    # reports, on its topology beside what the kubelet holds, and only the pods the kubelet does not hold
    observed = [a for a in old if a.origin == Allocation.OBSERVED] if row.pk in run.reported else []
    _name_observed(row, observed, run.write)
    engine = EngineNode(name, services.topology_of(row) if row.pk in run.reported else snode.topology,
                        services.kubelet_of(row), [services.allocation_to_engine(a) for a in observed],
                        labels=snode.labels)
    replayed = _replay(run, name, engine, {a.pod for a in observed})
    report["disagreements"].extend(f"{name}: {d}" for d in _availability(snode, engine))
    kept = observed + _keep_scheduled(run, name, engine, [a for a in old if a.origin != Allocation.OBSERVED])
    run.engines[name] = engine
    allocs_changed = sorted(_alloc_key(a) for a in old if a.origin == Allocation.REPLAYED) != sorted(
        _alloc_key(a) for a in replayed) or len(kept) != len([a for a in old if a.origin != Allocation.REPLAYED])
    report["allocations_replayed"] += len(replayed)
    if before is None:
        row.imported_at = run.now
        run.new_rows.append((row, replayed))
        report["nodes_added"].append(name)
        return
    changed = [label for label, a, b in zip(_FINGERPRINT_LABELS, before, _fingerprint(row), strict=True) if a != b]
    if allocs_changed:
        changed.append("allocations")
        report["allocations_changed"].append(name)
    if returned:
        changed.append("returned")
        report["nodes_returned"].append(name)
    if not changed:
        report["nodes_unchanged"] += 1
        return
    report["nodes_updated"][name] = changed
    if run.write:
        row.imported_at = run.now
        row.save()  # its generation advances
    if allocs_changed:
        kept_ids = {a.pk for a in kept}
        run.drop.extend(a.pk for a in old if a.pk not in kept_ids)
        run.inserts.extend((row, a) for a in replayed)


def _describe(run: _Import, row: Node, snode: SnapshotNode) -> None:
    """The row's kubelet settings, topology, labels and snapshot facts from the snapshot (its truth); on a node
    a node agent reports, the agent's topology and kubelet settings stay (read from the node itself)."""
    if row.pk not in run.reported:
        services.set_kubelet(row, snode.kubelet)
        data = run.topologies.get(id(snode.topology))
        if data is None:
            data = run.topologies[id(snode.topology)] = snode.topology.to_dict()
        services.set_topology(row, snode.topology, snode.source, imported=False, data=data)
    row.labels = snode.labels
    # Volcano's numa-aware plugin sees only nodes whose resource exporter publishes a Numatopology
    row.numatopology = "numatopo" in snode.source.split("+")
    row.snapshot = {"capacity": snode.capacity, "allocatable": snode.allocatable,
                    "available": {str(n): r for n, r in sorted(snode.available.items())},
                    "inferred": list(snode.topology.inferred), "notes": snode.notes}
    pod_names = {p.uid: f"{p.namespace}/{p.name}" for p in run.snap.running_on(row.name)
                 if p.uid != f"{p.namespace}/{p.name}"}
    if pod_names:  # a kubelet state file names pods by UID only: these let its import name them
        row.snapshot["pods"] = dict(sorted(pod_names.items()))


def _name_observed(row: Node, observed: list[Allocation], write: bool) -> None:
    """Observed allocations the kubelet knows by pod UID take the name the snapshot gives that UID (their job
    is linked at the end of the import, as every allocation's; a dry run renames them in memory only)."""
    names = (row.snapshot or {}).get("pods") or {}
    for a in observed:
        if a.pod in names:
            a.pod = names[a.pod]
            if write:
                Allocation.objects.filter(pk=a.pk).update(pod=a.pod)


def _replay(run: _Import, name: str, engine: EngineNode, observed: set[str]) -> list[Allocation]:
    """The node's running pods admitted in creation order on `engine`: their allocations (not saved);
    a pod the replay refuses is a disagreement. Pods the node's kubelet holds (`observed`, by name or
    UID) are not replayed: the agent's report says where they are."""
    pods = [p for p in run.snap.running_on(name)
            if f"{p.namespace}/{p.name}" not in observed and p.uid not in observed]
    replayed: list[Allocation] = []
    for spod, result in zip(pods, replay(engine, [p.pod for p in pods]), strict=True):
        if not result.admitted:
            run.report["disagreements"].append(f"{name}: running pod {spod.namespace}/{spod.name} is refused "
                                               f"by the replay: {result.error}")
            continue
        for a in result.allocations:
            replayed.append(Allocation(pod=f"{spod.namespace}/{spod.name}", container=a.container or "",
                                       cpus=str(a.cpus), memory={str(n): dict(r) for n, r in a.memory.items()},
                                       devices={r: list(ids) for r, ids in a.devices.items()},
                                       origin=Allocation.REPLAYED))
    return replayed


def _keep_scheduled(run: _Import, name: str, engine: EngineNode, old: list[Allocation]) -> list[Allocation]:
    """The node's scheduled allocations that still fit after the replay (allocated on `engine`); one whose
    pod now runs, or that no longer fits, is dropped and reported."""
    kept: list[Allocation] = []
    for a in old:
        if a.origin == Allocation.REPLAYED:
            continue
        if a.origin == Allocation.IMPORTED:
            continue  # state-file pinning of an older node description; the replay replaces it
        if a.pod in run.running:
            run.report["scheduled_dropped"].append(f"{name}: {a.pod}/{a.container or '-'} (now running; "
                                                   "the snapshot's pod is replayed instead)")
            continue
        try:
            engine.allocate(services.allocation_to_engine(a))
            kept.append(a)
        except EngineError as exc:
            run.report["scheduled_dropped"].append(f"{name}: {a.pod}/{a.container or '-'} ({exc})")
    return kept


def _leave_unlisted(run: _Import, prune: bool) -> None:
    """Nodes the snapshot no longer lists: reported, or with `prune` flagged removed. On such a node a pod
    the snapshot shows running elsewhere holds nothing here any more (it is replayed where it runs); with
    prune, no replayed pod runs here any more."""
    report = run.report
    gone = [n for name, n in run.existing.items() if name not in run.snap.nodes and n.removed_at is None]
    if gone and not prune:
        report["nodes_missing"] = sorted(n.name for n in gone)
    elif gone:
        if run.write:
            Node.objects.filter(pk__in=[n.pk for n in gone]).advance(removed_at=run.now)
        report["nodes_removed"] = sorted(n.name for n in gone)
    for name, n in run.existing.items():
        if name in run.snap.nodes:
            continue
        for a in run.allocs.get(n.pk, ()):
            if a.pod in run.running or (prune and a.origin == Allocation.REPLAYED):
                run.drop.append(a.pk)
                if a.origin != Allocation.REPLAYED:
                    report["scheduled_dropped"].append(f"{name}: {a.pod}/{a.container or '-'} (now running on "
                                                       "another node; the snapshot's pod is replayed there)")


def _write_allocations(run: _Import) -> None:
    """Every dropped allocation released, then the new nodes inserted and every replayed allocation with
    them."""
    run.report["allocations_dropped"] = len(run.drop)
    if not run.write:
        return
    if run.drop:
        services.release(Allocation.objects.filter(pk__in=run.drop))
    if run.new_rows:
        Node.objects.bulk_create([r for r, _ in run.new_rows], batch_size=500)
        created = {n.name: n for n in Node.objects.filter(cluster=run.cluster,
                                                          name__in=[r.name for r, _ in run.new_rows])
                   .only("pk", "name", "cluster_id")}
        run.inserts.extend((created[row.name], a) for row, replayed in run.new_rows for a in replayed)
    for row, a in run.inserts:
        a.node, a.cluster = row, run.cluster
    Allocation.objects.bulk_create([a for _, a in run.inserts], batch_size=1000)


def _store_dra(run: _Import) -> None:
    """The snapshot's DRA devices, claims and pod alignments (`inventory.dra`), before the generations are read
    for the rejected pods: a node whose devices changed is reported updated, and advanced unless saved already."""
    report = run.report
    report["dra"], nodes = dra.store(run.cluster, run.snap, run.engines, run.write)
    fresh = sorted(n for n in nodes if n not in report["nodes_updated"] and n not in report["nodes_added"])
    for name in nodes:
        if name in report["nodes_updated"]:
            report["nodes_updated"][name].append("dra devices")
    for name in fresh:
        report["nodes_updated"][name] = ["dra devices"]
    report["nodes_unchanged"] -= len(fresh)
    if run.write and fresh:
        dra.advance(run.cluster, fresh)


def _copies(cluster: Cluster, running: set[str]) -> list[str]:
    """A note per other cluster where pods this snapshot shows running are replayed too: one snapshot
    imported into two clusters makes two copies of one real cluster (docs/IMPORT.md), each holding them."""
    pods = sorted(running)
    others: dict[str, set[str]] = {}
    for start in range(0, len(pods), 500):
        for name, pod in (Allocation.objects.filter(origin=Allocation.REPLAYED, pod__in=pods[start:start + 500])
                          .exclude(cluster=cluster).values_list("cluster__name", "pod").distinct()):
            others.setdefault(name, set()).add(pod)
    return [f"{len(found)} running pod(s) of this snapshot (e.g. {min(found)}) are also replayed in cluster {name}: "
            "the two clusters are copies of one real cluster, each holding those pods"
            for name, found in sorted(others.items())]


def _import_jobs(cluster: Cluster, snap: Snapshot, report: ImportReport, write: bool) -> None:
    """Pending work, as jobs of `cluster`: a new job is added; a pending one whose manifest changed is
    replaced; one that a session already scheduled is kept as it is (reported only, unless `write`)."""
    for job in snap.jobs:
        key = (job.namespace, job.name)
        manifest = snap.manifests[key]
        job_services.check_policy_cpus(job)
        row = None if cluster.pk is None else Job.objects.filter(cluster=cluster, namespace=job.namespace,
                                                                 name=job.name).first()
        label = f"{job.namespace}/{job.name}"
        if row is not None and row.manifest == manifest and row.source_format == "snapshot":
            continue
        if row is not None:
            if row.status != Job.PENDING:
                report["jobs_kept"].append(label)
                continue
            if write:
                row.delete()
            report["jobs_updated"].append(label)
        else:
            report["jobs_added"].append(label)
        if write:
            job_services.save_job(job, cluster, manifest, "snapshot")
