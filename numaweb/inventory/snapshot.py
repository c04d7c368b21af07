"""A kubectl cluster snapshot into one cluster (parsing is the engine's: `scheduler_core.formats.snapshot`).

In one transaction: nodes are created or updated (generation bumped only when something changed),
the running pods of each node are replayed in creation order through the engine's kubelet model and
stored as `replayed` allocations, what NRT says is still available per NUMA node is checked against
the replay, and pending Volcano Jobs and pods become jobs of the cluster. Importing the same snapshot
again changes nothing; the returned report says what changed and every disagreement found.

An import cannot destroy by accident: a snapshot that lists no node (an empty file, `items: []`, only
pods) is refused unless `allow_empty`; nodes the snapshot no longer lists are only reported, and
flagged `removed_at` (their replayed pods released) only with `prune`; `dry_run` computes the same
report and rolls everything back."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.progress import bar_over
from scheduler_core.errors import EngineError
from scheduler_core.formats.snapshot import Snapshot, SnapshotNode, load_snapshot
from scheduler_core.node import Node as EngineNode
from scheduler_core.state_check import replay

from . import services
from .models import Allocation, Cluster, Node


class EmptySnapshot(ValueError):
    """The snapshot lists no node; importing it is refused unless asked for (`allow_empty`)."""


EMPTY = ("the snapshot lists no node (an empty file, `items: []`, or only pods and jobs; a failed `kubectl get` "
         "leaves such a file): nothing was imported and cluster {cluster} is as it was. To import it all the same, "
         "allow an empty snapshot (import_cluster --allow-empty, API allow_empty=true)")


def parse(data: bytes | str) -> Snapshot:
    """The engine's snapshot reader; text goes in as bytes so it is never taken for a server path."""
    return load_snapshot(data.encode() if isinstance(data, str) else bytes(data))


def _alloc_key(a) -> tuple:
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


def import_snapshot(cluster: Cluster, data: bytes | str, *, prune: bool = False, allow_empty: bool = False,
                    dry_run: bool = False, progress: bool = False) -> dict[str, Any]:
    """Create or update `cluster` from a snapshot; returns the report (also kept on the cluster, unless
    `dry_run`: then nothing at all is changed). Raises EmptySnapshot for a snapshot without nodes unless
    `allow_empty`; removes nodes the snapshot no longer lists only with `prune`. `progress`: a bar over the
    nodes on a terminal (the management command)."""
    snap = parse(data)
    if not snap.nodes and not allow_empty:
        raise EmptySnapshot(EMPTY.format(cluster=cluster.name))
    report: dict[str, Any] = {"dry_run": dry_run, "pruned": prune, "nodes_added": [], "nodes_updated": {},
                              "nodes_unchanged": 0, "nodes_removed": [], "nodes_missing": [], "nodes_returned": [],
                              "allocations_replayed": 0, "allocations_dropped": 0, "allocations_changed": [],
                              "scheduled_dropped": [], "disagreements": [], "jobs_added": [], "jobs_updated": [],
                              "jobs_kept": [], "notes": list(snap.notes)}
    now = timezone.now()
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
        # hold the cluster's nodes (in id order, as every allocation writer does) until the end
        existing = {n.name: n for n in services.hold_nodes(
            Node.objects.filter(cluster=cluster).values_list("pk", flat=True)).values()}
        running = {f"{p.namespace}/{p.name}" for p in snap.pods if p.phase == "Running" and p.node in snap.nodes}
        drop: list[int] = []          # every deletion is done before any insert: a pod may move nodes
        inserts: list[tuple[Node, Allocation]] = []
        allocs: dict[int, list[Allocation]] = {}
        for a in Allocation.objects.filter(node__cluster=cluster).order_by("id"):
            allocs.setdefault(a.node_id, []).append(a)
        new_rows: list[tuple[Node, list[Allocation]]] = []
        dicts: dict[int, dict] = {}  # nodes of one shape share their Topology: serialise it once
        for name, snode in bar_over(snap.nodes.items(), len(snap.nodes), "nodes", progress):
            row = existing.get(name)
            is_new = row is None
            if is_new:
                row = Node(cluster=cluster, name=name)
            before = (row.fingerprint, services.kubelet_dict(row), dict(row.labels or {}),
                      (row.source_format, row.numatopology), dict(row.snapshot or {})) if not is_new else None
            services.set_kubelet(row, snode.kubelet)  # the snapshot is the cluster's truth
            data = dicts.get(id(snode.topology))
            if data is None:
                data = dicts[id(snode.topology)] = snode.topology.to_dict()
            services.set_topology(row, snode.topology, snode.source, imported=False, data=data)
            row.labels = snode.labels
            # Volcano's numa-aware plugin sees only nodes whose resource exporter publishes a Numatopology
            row.numatopology = "numatopo" in snode.source.split("+")
            row.snapshot = {"capacity": snode.capacity, "allocatable": snode.allocatable,
                            "available": {str(n): r for n, r in sorted(snode.available.items())},
                            "inferred": list(snode.topology.inferred), "notes": snode.notes}
            pod_names = {p.uid: f"{p.namespace}/{p.name}" for p in snap.running_on(name)
                         if p.uid != f"{p.namespace}/{p.name}"}
            if pod_names:  # a kubelet state file names pods by UID only: these let its import name them
                row.snapshot["pods"] = dict(sorted(pod_names.items()))
            returned = not is_new and row.removed_at is not None
            row.removed_at = None
            # replay the node's running pods, in creation order, on a node without allocations
            engine = EngineNode(name, snode.topology, services.kubelet_of(row))
            replayed: list[Allocation] = []
            for spod, result in zip(snap.running_on(name), replay(engine, [p.pod for p in snap.running_on(name)]),
                                    strict=True):
                if not result.admitted:
                    report["disagreements"].append(f"{name}: running pod {spod.namespace}/{spod.name} is refused "
                                                   f"by the replay: {result.error}")
                    continue
                for a in result.allocations:
                    replayed.append(Allocation(pod=f"{spod.namespace}/{spod.name}", container=a.container or "",
                                               cpus=str(a.cpus),
                                               memory={str(n): dict(r) for n, r in a.memory.items()},
                                               devices={r: list(ids) for r, ids in a.devices.items()},
                                               origin=Allocation.REPLAYED))
            report["disagreements"].extend(f"{name}: {d}" for d in _availability(snode, engine))
            old = allocs.get(row.pk, []) if not is_new else []
            old_replayed = sorted(_alloc_key(a) for a in old if a.origin == Allocation.REPLAYED)
            kept: list[Allocation] = []
            for a in old:
                if a.origin == Allocation.REPLAYED:
                    continue
                if a.origin == Allocation.IMPORTED:
                    continue  # state-file pinning of an older node description; the replay replaces it
                if a.pod in running:
                    report["scheduled_dropped"].append(f"{name}: {a.pod}/{a.container or '-'} (now running; "
                                                       "the snapshot's pod is replayed instead)")
                    continue
                try:
                    engine.allocate(services.allocation_to_engine(a))
                    kept.append(a)
                except EngineError as exc:
                    report["scheduled_dropped"].append(f"{name}: {a.pod}/{a.container or '-'} ({exc})")
            allocs_changed = old_replayed != sorted(_alloc_key(a) for a in replayed) or len(kept) != len(
                [a for a in old if a.origin != Allocation.REPLAYED])
            report["allocations_replayed"] += len(replayed)
            if is_new:
                row.imported_at = now
                new_rows.append((row, replayed))
                report["nodes_added"].append(name)
                continue
            after = (row.fingerprint, services.kubelet_dict(row), dict(row.labels or {}),
                     (row.source_format, row.numatopology), dict(row.snapshot or {}))
            changed = [label for label, a, b in zip(("topology", "kubelet", "labels", "source", "capacity"),
                                                     before, after, strict=True) if a != b]
            if allocs_changed:
                changed.append("allocations")
                report["allocations_changed"].append(name)
            if returned:
                changed.append("returned")
                report["nodes_returned"].append(name)
            if not changed:
                report["nodes_unchanged"] += 1
                continue
            report["nodes_updated"][name] = changed
            row.imported_at = now
            row.generation = F("generation") + 1
            row.save()
            if allocs_changed:
                kept_ids = {a.pk for a in kept}
                drop.extend(a.pk for a in old if a.pk not in kept_ids)
                inserts.extend((row, a) for a in replayed)
        gone = [n for name, n in existing.items() if name not in snap.nodes and n.removed_at is None]
        if gone and not prune:
            report["nodes_missing"] = sorted(n.name for n in gone)
        elif gone:
            Node.objects.filter(pk__in=[n.pk for n in gone]).update(removed_at=now, generation=F("generation") + 1)
            report["nodes_removed"] = sorted(n.name for n in gone)
        # on a node the snapshot no longer lists: a pod it shows running elsewhere holds nothing here any
        # more (it is replayed where it runs); with prune, no replayed pod runs here any more
        for name, n in existing.items():
            if name in snap.nodes:
                continue
            for a in allocs.get(n.pk, ()):
                if a.pod in running or (prune and a.origin == Allocation.REPLAYED):
                    drop.append(a.pk)
                    if a.origin != Allocation.REPLAYED:
                        report["scheduled_dropped"].append(f"{name}: {a.pod}/{a.container or '-'} (now running on "
                                                           "another node; the snapshot's pod is replayed there)")
        report["allocations_dropped"] = len(drop)
        if drop:
            services.release(Allocation.objects.filter(pk__in=drop))
        if new_rows:
            Node.objects.bulk_create([r for r, _ in new_rows], batch_size=500)
            created = {n.name: n for n in Node.objects.filter(cluster=cluster, name__in=[r.name for r, _ in new_rows])
                       .only("pk", "name", "cluster_id")}
            inserts.extend((created[row.name], a) for row, replayed in new_rows for a in replayed)
        for row, a in inserts:
            a.node, a.cluster = row, cluster
        Allocation.objects.bulk_create([a for _, a in inserts], batch_size=1000)
        _import_jobs(cluster, snap, report)
        job_services.link_allocations(cluster)
        report["notes"].extend(_copies(cluster, running))
        summary = dict(report)
        summary["changed"] = bool(report["nodes_added"] or report["nodes_updated"] or report["nodes_removed"]
                                  or report["jobs_added"] or report["jobs_updated"])
        if dry_run:
            transaction.set_rollback(True)  # the preview: everything above is undone
        else:
            Cluster.objects.filter(pk=cluster.pk).update(source=Cluster.SNAPSHOT, imported_at=now,
                                                         last_import=summary)
    return summary


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


def _import_jobs(cluster: Cluster, snap: Snapshot, report: dict) -> None:
    """Pending work, as jobs of `cluster`: a new job is added; a pending one whose manifest changed is
    replaced; one that a session already scheduled is kept as it is."""
    for job in snap.jobs:
        key = (job.namespace, job.name)
        manifest = snap.manifests[key]
        job_services.check_policy_cpus(job)
        row = Job.objects.filter(cluster=cluster, namespace=job.namespace, name=job.name).first()
        label = f"{job.namespace}/{job.name}"
        if row is not None and row.manifest == manifest and row.source_format == "snapshot":
            continue
        if row is not None:
            if row.status != Job.PENDING:
                report["jobs_kept"].append(label)
                continue
            row.delete()
            report["jobs_updated"].append(label)
        else:
            report["jobs_added"].append(label)
        job_services.save_job(job, cluster, manifest, "snapshot")
