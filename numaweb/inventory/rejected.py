"""Pods the kubelet rejected, kept from a snapshot import, explained and given their remedies.

The import (`inventory.snapshot`) hands over, at the end of its transaction, every listed node's engine
state as the import knew it (the replayed running pods and the session allocations kept); here each
rejected pod's admission is replayed on its node (`scheduler_core.scheduler.rejected.explain_rejection`)
and its remedies searched on the whole cluster (`Remedies`), then the rows are written: added, updated
only when something changed, and removed when the snapshot no longer lists the pod. A pod is computed
again only when it, or the generation of any listed node, changed since (its `digest`): a re-import of
the same snapshot computes and writes nothing. Reads: the API's `status=rejected` filter, pod search,
the node page, a rejected pod's page and the cluster-wide counts."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, TypedDict

from django.db.models import F, QuerySet

from scheduler_core.formats.snapshot import KUBELET_REJECTIONS, Snapshot, SnapshotNode, SnapshotPod
from scheduler_core.model.node import Node as EngineNode
from scheduler_core.scheduler.cluster import Cluster as EngineCluster
from scheduler_core.scheduler.rejected import Remedies, as_rejected_on, explain_rejection

from .models import Cluster, Node, RejectedPod

#: seconds an import may spend looking for make-room plans over all its rejected pods (each search is
#: bounded by MAKE_ROOM_SECONDS); past it a pod's remedies say the search was not made
MAKE_ROOM_BUDGET = 10.0
MAKE_ROOM_SECONDS = 1.0
_COMPARED = ("node_id", "uid", "reason", "message", "rejected_at", "job", "gang", "node_class", "reproduced",
             "resource", "explanation", "remedies", "digest")


class RejectedReport(TypedDict):
    kept: int
    added: list[str]
    updated: list[str]
    removed: list[str]
    reproduced: int
    seconds: float


def node_class(snode: SnapshotNode) -> str:
    """A node's machine and NUMA settings in a few words: what the cluster-wide view groups by."""
    topo, k = snode.topology, snode.kubelet
    return (f"{topo.all_cpus.bit_count()} CPUs × {len(topo.numa_ids)} NUMA, {k.topology_manager_policy} "
            f"({k.topology_manager_scope} scope)")


def store(cluster: Cluster, snap: Snapshot, engines: Mapping[str, EngineNode],
          rows: Mapping[str, Node], write: bool = True) -> RejectedReport:
    """Explain and remedy the snapshot's rejected pods on `engines` (every listed node's state after the
    import) and write their rows (a dry run, `write` False, only reports what it would write); `rows` are the
    node rows by name."""
    started = time.monotonic()
    pods = snap.rejected()
    # the remedies depend on every node: a pod is computed again when it or any listed node changed
    state = hashlib.sha256(repr(sorted((name, row.generation) for name, row in rows.items())).encode())
    existing = {(r.namespace, r.name): r for r in RejectedPod.objects.filter(cluster=cluster)} if cluster.pk else {}
    digests = {(p.namespace, p.name): _digest(state.copy(), p) for p in pods}
    todo = [p for p in pods if (row := existing.get((p.namespace, p.name))) is None
            or row.digest != digests[(p.namespace, p.name)]]
    finder = None
    if todo:
        # the engine's allocations name pods by UID (what the replay admitted); the inventory, make room's
        # moves and the kubelet by namespace/name
        names = {p.uid: f"{p.namespace}/{p.name}" for p in snap.pods}
        renamed = {}
        for name, n in engines.items():
            renamed[name] = n.copy()
            renamed[name].allocations = [dataclasses.replace(a, pod=names[a.pod]) if a.pod in names else a
                                         for a in n.allocations]
        engines = renamed
        finder = Remedies(EngineCluster(engines.values()), make_room_time=MAKE_ROOM_SECONDS)
    report = RejectedReport(kept=len(pods), added=[], updated=[], removed=[], reproduced=0, seconds=0.0)
    new: list[RejectedPod] = []
    changed: list[RejectedPod] = []
    budget = started + MAKE_ROOM_BUDGET
    for spod in pods:
        row = existing.pop((spod.namespace, spod.name), None)
        if row is not None and row.digest == digests[(spod.namespace, spod.name)]:
            report["reproduced"] += row.reproduced
            continue
        values = _values(spod, snap.nodes[spod.node], engines[spod.node], rows[spod.node], finder, budget)
        values["digest"] = digests[(spod.namespace, spod.name)]
        report["reproduced"] += bool(values["reproduced"])
        label = f"{spod.namespace}/{spod.name}"
        if row is None:
            new.append(RejectedPod(cluster=cluster, namespace=spod.namespace, name=spod.name, **values))
            report["added"].append(label)
        elif any(getattr(row, f) != values[f] for f in _COMPARED):
            for f in _COMPARED:
                setattr(row, f, values[f])
            changed.append(row)
            report["updated"].append(label)
    if write:
        RejectedPod.objects.bulk_create(new, batch_size=500)
        RejectedPod.objects.bulk_update(changed, list(_COMPARED), batch_size=500)
        RejectedPod.objects.filter(pk__in=[r.pk for r in existing.values()]).delete()
    report["removed"] = sorted(f"{ns}/{name}" for ns, name in existing)
    report["seconds"] = round(time.monotonic() - started, 3)
    return report


def _digest(state: Any, pod: SnapshotPod) -> str:
    """`state` (a hash of the listed nodes' generations) updated with the pod as the snapshot says it."""
    state.update(repr((pod.uid, pod.node, pod.reason, pod.message, pod.rejected_at, pod.job, pod.gang,
                       pod.pod)).encode())
    return str(state.hexdigest())


def _values(spod: SnapshotPod, snode: SnapshotNode, engine: EngineNode, row: Node, finder: Remedies | None,
            budget: float) -> dict[str, Any]:
    engine, note = as_rejected_on(engine, spod.reason)
    explanation = explain_rejection(engine, spod.pod, spod.reason)
    if note:
        explanation.sentence = f"{explanation.sentence} ({note})"
    remedies: list[dict[str, Any]] = []
    if finder is not None:
        finder.make_room_time = max(0.0, min(MAKE_ROOM_SECONDS, budget - time.monotonic()))
        remedies = [dict(r.to_dict()) for r in finder.find(engine, spod.pod)]
    return {"node_id": row.pk, "uid": spod.uid, "reason": spod.reason, "message": spod.message,
            "rejected_at": spod.rejected_at, "job": spod.job or "", "gang": spod.gang or "",
            "node_class": node_class(snode), "reproduced": explanation.reproduced,
            "resource": explanation.resource or "", "explanation": dict(explanation.to_dict()), "remedies": remedies}


# -- reads -------------------------------------------------------------------------------------------


def rejected_pods(cluster: int | None = None, reason: str = "", node: str = "",
                  query: str = "") -> QuerySet[RejectedPod]:
    """The rejected pods, filtered: cluster id, reason, node name, part of namespace/name."""
    # names only: a node row's topology document is large and not needed here
    rows = RejectedPod.objects.annotate(node_name=F("node__name"), cluster_name=F("cluster__name")).order_by(
        "namespace", "name", "cluster_id")
    if cluster is not None:
        rows = rows.filter(cluster_id=cluster)
    if reason:
        rows = rows.filter(reason=reason)
    if node:
        rows = rows.filter(node__name=node)
    if query:
        ns, slash, name = query.partition("/")
        rows = rows.filter(namespace__icontains=ns, name__icontains=name) if slash else (
            rows.filter(name__icontains=query) | rows.filter(namespace__icontains=query))
    return rows


def as_row(pod: RejectedPod) -> dict[str, Any]:
    """A rejected pod as the API lists it (`status` is always "rejected": it holds nothing)."""
    return {
        "pod": f"{pod.namespace}/{pod.name}", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid,
        "cluster": {"id": pod.cluster_id, "name": getattr(pod, "cluster_name", None) or pod.cluster.name},
        "node": {"id": pod.node_id, "name": getattr(pod, "node_name", None) or pod.node.name},
        "status": "rejected", "reason": pod.reason, "message": pod.message, "rejected_at": pod.rejected_at or None,
        "job": pod.job or None, "gang": pod.gang or None, "node_class": pod.node_class,
        "reproduced": pod.reproduced, "explanation": pod.explanation, "remedies": pod.remedies,
    }


def summary(cluster: Cluster) -> dict[str, Any]:
    """The cluster-wide view: rejected pods by reason, by node class and by resource, with remedy counts
    (how many pods each kind of remedy was found for) overall and per group."""
    total = 0
    groups: dict[str, dict[str, dict[str, Any]]] = {"by_reason": {}, "by_node_class": {}, "by_resource": {}}
    remedies: Counter[str] = Counter()
    unreproduced = 0
    for reason, klass, resource, reproduced, found in RejectedPod.objects.filter(cluster=cluster).values_list(
            "reason", "node_class", "resource", "reproduced", "remedies"):
        total += 1
        unreproduced += not reproduced
        kinds = sorted({r["kind"] for r in found if r.get("viable", True)})
        remedies.update(kinds)
        for group, key in (("by_reason", reason), ("by_node_class", klass),
                           ("by_resource", resource or "(none named)")):
            entry = groups[group].setdefault(key, {"pods": 0, "remedies": Counter(), "none": 0})
            entry["pods"] += 1
            entry["remedies"].update(kinds)
            entry["none"] += not kinds
    out: dict[str, Any] = {"cluster": {"id": cluster.pk, "name": cluster.name}, "rejected": total,
                           "not_reproduced": unreproduced, "remedies": dict(sorted(remedies.items()))}
    for group, entries in groups.items():
        out[group] = [{"key": key, "pods": e["pods"], "remedies": dict(sorted(e["remedies"].items())),
                       "without_remedy": e["none"]}
                      for key, e in sorted(entries.items(), key=lambda kv: (-kv[1]["pods"], kv[0]))]
    return out


__all__ = ["KUBELET_REJECTIONS", "as_row", "rejected_pods", "store", "summary"]
