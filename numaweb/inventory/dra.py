"""A snapshot's Dynamic Resource Allocation objects kept with its cluster, and the alignment of every pod using
DRA devices.

The engine reads the objects (`Snapshot.dra`, `scheduler_core.dra.objects`) and judges alignment
(`scheduler_core.dra.alignment.check`); here its answers become rows, written inside the import's transaction
and only where something changed, so importing the same snapshot again rewrites nothing and advances no
generation. A node whose devices changed has its generation advanced (`Node.objects...advance()`), like any other
change to it. Pages and the API read these rows: nothing is judged again per request."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from django.db import models

from scheduler_core.dra.alignment import check
from scheduler_core.dra.allocator import Allocator
from scheduler_core.dra.model import Device, DraState, ResourceClaim
from scheduler_core.dra.suggest import suggest
from scheduler_core.formats.claims import read_state, sources
from scheduler_core.formats.snapshot import Snapshot
from scheduler_core.formats.snapshot import objects as snapshot_objects
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job
from scheduler_core.model.node import Node as EngineNode
from scheduler_core.model.topology import Topology

from .models import Allocation, Cluster, DraClaim, DraDevice, DraSource, Node, PodAlignment

_DEVICE_FIELDS = ("node_id", "kind", "numa", "numa_source", "attributes", "capacity", "claim", "pod")
_CLAIM_FIELDS = ("template", "requests", "constraints", "allocation", "reserved_for")
_POD_FIELDS = ("node_id", "aligned", "kinds", "detail", "cpu_numa", "memory_numa", "devices", "claims",
               "suggestions", "suggestion_digest")
#: misaligned pods whose claim change one import computes: an allocator run each, on one allocator for the import
#: (0.3 ms a pod at 5,000 nodes of 8 GPUs, benchmarks/README.md): a bound against a cluster whose claims make the
#: search long, not a cut a real cluster meets
SUGGEST_PODS = 20_000


class DraReport(TypedDict):
    """What an import found and changed of DRA (the import report's `dra`)."""

    devices: int
    claims: int
    pods: int  # pods using DRA devices, whose alignment was checked
    misaligned: list[str]  # namespace/name of each misaligned pod
    nodes_changed: list[str]  # nodes whose devices changed (their generation advanced)
    changed: bool


def store(cluster: Cluster, snap: Snapshot, engines: Mapping[str, EngineNode], write: bool = True
          ) -> tuple[DraReport, set[str]]:
    """Write the snapshot's devices, claims and pod alignments into `cluster` (`engines`: each listed node as
    the import leaves it, whose allocations give the pods' pinned CPUs and memory); returns the report and the
    names of the nodes whose devices changed. `write` False (a dry run) writes nothing."""
    state = snap.dra
    names = {} if cluster.pk is None else dict(Node.objects.filter(cluster=cluster).values_list("name", "pk"))
    holders = _holders(state)
    devices: dict[tuple, dict[str, Any]] = {}
    for d in _devices(state):
        claim, pod = holders.get(d.key, ("", ""))
        devices[d.key] = {"node_id": names.get(d.node or ""), "kind": d.kind, "numa": d.numa,
                          "numa_source": d.numa_source, "attributes": dict(d.attributes),
                          "capacity": dict(d.capacity), "claim": claim, "pod": pod}
    claims = {key: {"template": c.template or "", "requests": [_jsonable(r) for r in c.requests],
                    "constraints": [_jsonable(k) for k in c.constraints],
                    "allocation": None if c.allocation is None else [_jsonable(r) for r in c.allocation],
                    "reserved_for": list(c.reserved_for)} for key, c in state.claims.items()}
    known = {} if cluster.pk is None else {
        (r.namespace, r.name): r for r in PodAlignment.objects.filter(cluster=cluster, aligned=False).only(
            "namespace", "name", "suggestions", "suggestion_digest")}
    held_on: dict[str | None, list[tuple[str, str, str]]] = {}
    for d in _devices(state):
        if d.key in holders:
            held_on.setdefault(d.node, []).append(d.key)
    pods = _alignments(snap, engines, names, _Changes(known, held_on))
    existing = DraDevice.objects.filter(cluster=cluster) if cluster.pk is not None else DraDevice.objects.none()
    old_nodes = {(d.driver, d.pool, d.name): d.node_id for d in existing.only("driver", "pool", "name", "node_id")}
    touched = _sync(cluster, DraDevice, ("driver", "pool", "name"), _DEVICE_FIELDS, devices, write)
    touched_nodes = {old_nodes.get(k) for k in touched} | {devices[k]["node_id"] for k in touched if k in devices}
    claims_changed = _sync(cluster, DraClaim, ("namespace", "name"), _CLAIM_FIELDS, claims, write)
    pods_changed = _sync(cluster, PodAlignment, ("namespace", "name"), _POD_FIELDS, pods, write)
    by_id = {pk: name for name, pk in names.items()}
    changed_nodes = {by_id[pk] for pk in touched_nodes if pk in by_id}
    # nodes of the devices' slices the cluster does not have yet (a new node, inserted by the import)
    changed_nodes |= {d.node for d in _devices(state) if d.key in touched and d.node in snap.nodes
                      and d.node not in names}
    report = DraReport(devices=len(devices), claims=len(claims), pods=len(pods),
                       misaligned=sorted(f"{ns}/{name}" for (ns, name), row in pods.items() if not row["aligned"]),
                       nodes_changed=sorted(changed_nodes), changed=bool(touched or claims_changed or pods_changed))
    return report, changed_nodes


def source_items(data: bytes | str) -> list[dict[str, Any]]:
    """What `state_of` reads back of a snapshot (`scheduler_core.formats.claims.sources`): its DRA objects, and the
    claims of its pods and pending Volcano Jobs."""
    return sources(snapshot_objects(data.encode() if isinstance(data, str) else bytes(data)))


def keep_source(cluster: Cluster, items: list[dict[str, Any]]) -> bool:
    """Keep the cluster's DRA objects (`source_items`); True when they changed."""
    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
    row = DraSource.objects.filter(cluster=cluster).only("digest").first()
    if row is not None and row.digest == digest:
        return False
    if not items:
        DraSource.objects.filter(cluster=cluster).delete()
        return row is not None
    DraSource.objects.update_or_create(cluster=cluster, defaults={"items": items, "digest": digest})
    return True


def state_of(cluster: Cluster, topologies: Mapping[str, Topology], jobs: Iterable[Job]) -> DraState | None:
    """The cluster's DRA state as its last snapshot gave it (None: it has no DRA objects), with the claims of
    `jobs` (a session's or comparison's) on their pods' names, read as the snapshot reader reads them;
    `topologies` place the devices published with a pcieRoot only."""
    row = DraSource.objects.filter(cluster=cluster).first()
    return None if row is None else read_state(row.items, topologies, jobs)


def advance(cluster: Cluster, nodes: Iterable[str]) -> None:
    """The nodes whose DRA devices changed (and nothing else the import saved) move to a new generation."""
    Node.objects.filter(cluster=cluster, name__in=list(nodes)).advance()


def _devices(state: DraState) -> list[Device]:
    return [d for s in state.slices for d in s.devices]


def _holders(state: DraState) -> dict[tuple[str, str, str], tuple[str, str]]:
    """Each allocated device's claim and pod ("namespace/name"): the pod that lists the claim, else the first
    the claim is reserved for."""
    users: dict[tuple[str, str], str] = {}
    for (ns, pod), keys in sorted(state.pod_claims.items()):
        for key in keys:
            users.setdefault(key, f"{ns}/{pod}")
    out: dict[tuple[str, str, str], tuple[str, str]] = {}
    for key, claim in state.claims.items():
        pod = users.get(key) or (claim.reserved_for[0] if claim.reserved_for else "")
        for result in claim.allocation or ():
            out[(result.driver, result.pool, result.device)] = (f"{key[0]}/{key[1]}", pod)
    return out


class _Changes:
    """The claim changes of an import's misaligned pods (`scheduler_core.dra.suggest`, a run each of one allocator
    built for the import, with the devices held on the pod's node): kept from the pod's row when what they were
    computed from is the same (its devices, CPUs' and memory's NUMA nodes, claims, and the devices held on its
    node), else computed for at most SUGGEST_PODS pods (in name order); a pod past that says so. Importing the
    same snapshot again computes and rewrites nothing."""

    def __init__(self, known: Mapping[tuple[str, str], PodAlignment],
                 held: Mapping[str | None, list[tuple[str, str, str]]]) -> None:
        self.known = known
        self.held = held  # the held devices by node
        self.computed = 0
        self.allocator: Allocator | None = None  # one for the import: its selector verdicts serve every pod

    def of(self, state: DraState, pod: tuple[str, str], node: str, row: Mapping[str, Any],
           claims: list[ResourceClaim]) -> tuple[list[dict[str, Any]], str]:
        digest = hashlib.sha256(repr((row["devices"], row["cpu_numa"], row["memory_numa"], row["claims"],
                                      self.held.get(node, []))).encode()).hexdigest()
        before = self.known.get(pod)
        if before is not None and before.suggestion_digest == digest:
            return before.suggestions, digest
        if self.computed >= SUGGEST_PODS:
            return [{"claim": f"{c.namespace}/{c.name}", "found": False, "constraint": None, "selectors": [],
                     "devices": [], "alignment": None,
                     "detail": f"not computed: an import computes the claim changes of at most {SUGGEST_PODS} "
                               "misaligned pods whose devices or CPUs changed, in name order, and this pod came "
                               "later"} for c in claims], digest
        self.computed += 1
        cpu_numa, memory_numa = frozenset(row["cpu_numa"]), frozenset(row["memory_numa"])
        if self.allocator is None:
            self.allocator = Allocator(state.classes, state.slices)
        held = self.held.get(node, []) + self.held.get(None, [])  # what the node's allocation can see
        return [{"claim": f"{c.namespace}/{c.name}",
                 **suggest(c, state, node, cpu_numa, memory_numa, self.allocator, held).to_dict()}
                for c in claims], digest


def _alignments(snap: Snapshot, engines: Mapping[str, EngineNode], names: Mapping[str, int], changes: _Changes
                ) -> dict[tuple[str, str], dict[str, Any]]:
    """Per pod on a listed node using DRA devices: the engine's alignment of its devices with the NUMA nodes of
    the CPUs and memory it holds there (as replayed, observed or kept by the import), and for a misaligned one
    the claim change that would align it."""
    state = snap.dra
    where = {(p.namespace, p.name): p for p in snap.pods if p.node in engines}
    held: dict[tuple[str, str], list] = {}
    for node, engine in engines.items():
        for a in engine.allocations:
            held.setdefault((node, a.pod), []).append(a)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (ns, pod), claims in sorted(state.pod_claims.items()):
        spod = where.get((ns, pod))
        devices = state.devices_of(ns, pod)
        if spod is None or not devices:
            continue
        allocs = held.get((spod.node, spod.uid), []) + (
            held.get((spod.node, f"{ns}/{pod}"), []) if spod.uid != f"{ns}/{pod}" else [])
        cpu_numa, memory_numa = _pinned(engines[spod.node].topology, [(a.cpus.mask, a.memory) for a in allocs])
        result = check(devices, cpu_numa, memory_numa)
        claim_of = {(r.driver, r.pool, r.device): f"{cns}/{cname}" for cns, cname in claims
                    if (c := state.claims.get((cns, cname))) is not None for r in c.allocation or ()}
        row = out[(ns, pod)] = {
            "node_id": names.get(spod.node), "aligned": result.aligned, "kinds": list(result.kinds),
            "detail": result.detail, "cpu_numa": sorted(cpu_numa), "memory_numa": sorted(memory_numa),
            "devices": [_device(d, claim_of.get(d.key, "")) for d in devices],
            "claims": [f"{cns}/{cname}" for cns, cname in claims], "suggestions": [], "suggestion_digest": ""}
        if not result.aligned:
            allocated = [c for key in claims if (c := state.claims.get(key)) is not None and c.allocation]
            row["suggestions"], row["suggestion_digest"] = changes.of(state, (ns, pod), spod.node, row, allocated)
    return out


def realign(node: Node, topology: Topology) -> None:
    """The node's DRA pods judged again against the CPUs and memory they hold now, after a node agent's report
    or a kubelet state file replaced the replay's guess with the kubelet's own pinning (the devices stay as the
    last snapshot published them). Rows are rewritten only when their answer changed."""
    rows = list(PodAlignment.objects.filter(node=node))
    if not rows:
        return
    held: dict[str, list[tuple[int, Mapping]]] = {}
    for pod, cpus, memory in Allocation.objects.filter(node=node, pod__in=[r.pod for r in rows]).values_list(
            "pod", "cpus", "memory"):
        held.setdefault(pod, []).append((CPUSet.parse(cpus or "").mask, memory or {}))
    changed = []
    for row in rows:
        cpu_numa, memory_numa = _pinned(topology, held.get(row.pod, []))
        devices = [Device(d["driver"], d["pool"], d["name"], node.name, {}, {}, d["kind"], d["numa"],
                          d["numa_source"]) for d in row.devices]
        result = check(devices, cpu_numa, memory_numa)
        values = {"aligned": result.aligned, "kinds": list(result.kinds), "detail": result.detail,
                  "cpu_numa": sorted(cpu_numa), "memory_numa": sorted(memory_numa)}
        if values["kinds"] != row.kinds:  # the claim change was computed for the old pinning, at import
            values["suggestions"], values["suggestion_digest"] = [], ""
        if any(getattr(row, f) != v for f, v in values.items()):
            for f, v in values.items():
                setattr(row, f, v)
            changed.append(row)
    if changed:
        PodAlignment.objects.bulk_update(changed, ["aligned", "kinds", "detail", "cpu_numa", "memory_numa",
                                                   "suggestions", "suggestion_digest"])


def _pinned(topology: Topology, held: Iterable[tuple[int, Mapping]]) -> tuple[frozenset[int], frozenset[int]]:
    """The NUMA nodes of the CPUs (masks) and the memory ({numa: {resource: bytes}}) a pod's containers hold."""
    cpus, memory = 0, set[int]()
    for mask, per_numa in held:
        cpus |= mask
        memory.update(int(n) for n, res in per_numa.items() if any(res.values()))
    return frozenset(n for n, mask in topology.numa_cpus.items() if mask & cpus), frozenset(memory)


def _device(d: Device, claim: str) -> dict[str, Any]:
    return {"driver": d.driver, "pool": d.pool, "name": d.name, "kind": d.kind, "numa": d.numa,
            "numa_source": d.numa_source, "claim": claim}


def _jsonable(value: Any) -> Any:
    """A frozen dataclass of the engine's DRA model (or a tuple or mapping of them) as JSON data."""
    if hasattr(value, "__dataclass_fields__"):
        return {name: _jsonable(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _sync(cluster: Cluster, model: type[models.Model], key_fields: tuple[str, ...], fields: tuple[str, ...],
          wanted: Mapping[tuple, Mapping[str, Any]], write: bool) -> set[tuple]:
    """Make the cluster's rows of `model` those of `wanted` (by key): add the new, update the changed, delete the
    gone; returns the keys touched. Nothing is written for an unchanged row, nor at all unless `write`."""
    rows = {} if cluster.pk is None else {
        tuple(getattr(r, f) for f in key_fields): r for r in model._default_manager.filter(cluster=cluster)}
    gone = [r.pk for k, r in rows.items() if k not in wanted]
    new, changed = [], []
    for key, values in wanted.items():
        row = rows.get(key)
        if row is None:
            new.append(model(cluster=cluster, **dict(zip(key_fields, key, strict=True)), **values))
        elif any(getattr(row, f) != values[f] for f in fields):
            for f in fields:
                setattr(row, f, values[f])
            changed.append(row)
    if write:
        if gone:
            model._default_manager.filter(pk__in=gone).delete()
        if changed:
            model._default_manager.bulk_update(changed, list(fields), batch_size=500)
        if new:
            model._default_manager.bulk_create(new, batch_size=1000)
    return ({k for k in rows if k not in wanted} | {tuple(getattr(r, f) for f in key_fields) for r in new + changed})
