"""A cluster snapshot: the output of
`kubectl get nodes,noderesourcetopologies,numatopologies,pods,jobs.batch.volcano.sh,podgroups,pdb -A -o yaml`
(or `-o json`; a `kind: List`, several documents, or a JSON array) → nodes, running pods, pending work and the
PodDisruptionBudgets over the running pods (`formats.disruption`).

Nodes: a node is described by its Volcano `Numatopology` and/or its `NodeResourceTopology` (both
named after the node); other kinds of object are matched to it by name.
- Numatopology alone: CPU ids, cores, sockets and NUMA nodes from `cpuDetail`; policies.
- NodeResourceTopology alone: per-zone counts only, so CPU ids are laid out by the NRT rule (zone
  `node-0` gets 0..c0-1, `node-1` the next c1 ids, one core per CPU, one socket per NUMA node),
  flagged inferred; memory, hugepages, devices per zone; costs as distances; attributes as policies.
- Both: CPUs from the Numatopology; memory, hugepages, devices and distances from the NRT; the NRT's
  topologyManagerPolicy/Scope attributes win over the Numatopology's policies (the NRT exporter
  reads the kubelet's configuration itself). A per-NUMA CPU count that differs is reported.
- The `Node` object adds labels, and capacity/allocatable: memory/hugepages the topology objects
  do not state are split evenly over the NUMA nodes (flagged inferred), device resources no NRT zone
  lists become devices without NUMA affinity, and capacity − allocatable of cpu is the kube/system
  reserved CPU when no reserved CPU list is known. A Node with neither topology object is skipped.
`source` names what described the node: "numatopo", "nrt" or "numatopo+nrt".

Pods: `metadata.uid`, `spec.nodeName`, `status.phase`, `metadata.creationTimestamp`; running pods
(phase Running, on a node) are what a replay puts back on their node. A pod the kubelet rejected
(phase Failed, `status.reason` one of KUBELET_REJECTIONS) is kept with its reason, message, time and
gang (`Snapshot.rejected`); it holds nothing. Pending work: Volcano Jobs
whose `status.state.phase` is absent, Pending or Inqueue (their PodGroup's `minMember` — matched by
owner reference, or named after the job — overrides `minAvailable`), and pending pods without a
node that no Volcano Job owns, each as a one-pod job.

Limits: the importers' checks (size before parsing, hardened YAML), with a size cap of its own
(`MAX_SNAPSHOT_BYTES`, 64 MiB: a cluster is many objects); each document may expand to at most
max(200,000, its input length) YAML nodes, so aliases cannot blow up memory.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from ..dra.model import DraState
from ..dra.objects import DRA_KINDS
from ..errors import EngineError, FormatError
from ..model.jobs import Job
from ..model.kubelet_config import KubeletConfig
from ..model.pods import Pod
from ..model.quantity import count, cpu_milli
from ..model.topology import Device, Topology
from . import disruption, nrt, volcano_numatopo, workloads
from ._documents import MAX_YAML_NODES, JSONObject, as_object, get_list, get_object, load_documents
from ._draft import Draft, build_topology
from ._source import read_source
from .claims import PENDING_JOB_PHASES, owner_job, pending_pod, read_state, volcano_job

#: the admission reasons a kubelet writes into the status of a pod it rejected (phase Failed); the
#: message is the admission error's text prefixed with "Pod was rejected: "
KUBELET_REJECTIONS = ("TopologyAffinityError", "SMTAlignmentError", "UnexpectedAdmissionError")
#: Volcano's annotation naming a pod's PodGroup (its gang)
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: Largest snapshot accepted, checked before parsing. Larger than one topology file's limit: a
#: cluster's objects add up (1,000 nodes with their NRT, Numatopology and pods are ~10 MiB of YAML,
#: ~27 MiB of kubectl's indented JSON); the JSON of 64 MiB is ~0.5 GiB of Python objects at most.
MAX_SNAPSHOT_BYTES = 64 * 2**20
NODE_KINDS = ("Node", "NodeResourceTopology", "Numatopology")


@dataclass
class SnapshotNode:
    """A node as the snapshot describes it."""

    name: str
    topology: Topology
    kubelet: KubeletConfig
    source: str
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    #: what the NRT says is still available per NUMA node: {numa: {resource: amount}} (cpu in CPUs)
    available: dict[int, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class SnapshotPod:
    uid: str
    name: str
    namespace: str
    node: str
    phase: str
    created: str
    pod: Pod
    job: str | None = None
    #: a pod the kubelet rejected (phase Failed, a reason of KUBELET_REJECTIONS): its status reason and
    #: message, when (the latest condition's transition, else its start or creation time) and its gang
    reason: str = ""
    message: str = ""
    rejected_at: str = ""
    gang: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def rejected(self) -> bool:
        return self.phase == "Failed" and self.reason in KUBELET_REJECTIONS and bool(self.node)


@dataclass
class Snapshot:
    nodes: dict[str, SnapshotNode] = field(default_factory=dict)
    pods: list[SnapshotPod] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    #: each pending job's manifest: the object's metadata (name, namespace, labels, annotations) and spec
    manifests: dict[tuple[str, str], str] = field(default_factory=dict)
    #: PodDisruptionBudgets: the running pods each covers and the disruptions it allows (formats.disruption)
    budgets: list[disruption.DisruptionBudget] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the DRA objects (ResourceSlices, DeviceClasses, claims, templates) and the pods' claims; empty when none
    dra: DraState = field(default_factory=DraState)
    _running: dict[str, list[SnapshotPod]] | None = field(default=None, repr=False)

    def rejected(self) -> list[SnapshotPod]:
        """The pods the kubelet of a listed node rejected, by node then namespace/name."""
        return sorted((p for p in self.pods if p.rejected and p.node in self.nodes),
                      key=lambda p: (p.node, p.namespace, p.name))

    def running_on(self, node: str) -> list[SnapshotPod]:
        """The node's running pods in creation order (ties: name), the order the kubelet admitted them."""
        if self._running is None:
            self._running = {}
            for p in sorted(self.pods, key=lambda p: (p.created, p.namespace, p.name)):
                if p.phase == "Running":
                    self._running.setdefault(p.node, []).append(p)
        return list(self._running.get(node, ()))


def objects(data: object, name: str = "snapshot") -> list[JSONObject]:
    """Every object of a kubectl output: `kind: List` items, multi-document YAML, JSON object or array."""
    src = read_source(data, MAX_SNAPSHOT_BYTES)
    if src.text is None:
        raise FormatError(f"{src.name}: a snapshot must be YAML or JSON text")
    text = src.text
    expected = "expected the YAML or JSON that `kubectl get ... -A -o yaml` prints"
    if text.lstrip().startswith("<"):
        raise FormatError(f"{name}: XML is not a kubectl snapshot; {expected}")
    docs = load_documents(text, name, max(MAX_YAML_NODES, len(text)))
    out: list[JSONObject] = []
    for i, doc in enumerate(docs, 1):
        if doc is None:
            continue
        if not isinstance(doc, dict | list):
            raise FormatError(f"{name}: document {i} is plain text, not Kubernetes objects; {expected}")
        items = doc if isinstance(doc, list) else (doc.get("items") if isinstance(doc, dict) and
                                                   str(doc.get("kind", "")).endswith("List") else [doc])
        if not isinstance(items, list):
            raise FormatError(f"{name}: document {i}: items must be a list")
        for j, obj in enumerate(items):
            if not isinstance(obj, dict):
                raise FormatError(f"{name}: document {i} item {j} is not an object")
            out.append(obj)
    return out


def _meta(obj: JSONObject, where: str) -> tuple[JSONObject, str]:
    """An object's metadata and its name, which every object of a snapshot must have."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(name, str) or not name:
        raise FormatError(f"{where}: metadata.name is required")
    return meta, name


def _labels(meta: JSONObject, where: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in get_object(meta, "labels", f"{where}: metadata").items()}


def load_snapshot(data: object, name: str = "snapshot") -> Snapshot:
    """Parse a kubectl snapshot (see the module docstring for the rules)."""
    snap = Snapshot()
    by_kind: dict[str, dict[str, JSONObject]] = {k: {} for k in NODE_KINDS}
    pods: list[tuple[str, JSONObject]] = []
    vc_jobs: list[tuple[str, JSONObject]] = []
    groups: list[JSONObject] = []
    budgets: list[tuple[str, JSONObject]] = []
    items = objects(data, name)
    for i, obj in enumerate(items):
        kind = obj.get("kind")
        where = f"{name}: item {i} ({kind})"
        if isinstance(kind, str) and kind in NODE_KINDS:
            _, obj_name = _meta(obj, where)
            if obj_name in by_kind[kind]:
                raise FormatError(f"{where}: {kind} {obj_name!r} appears twice")
            by_kind[kind][obj_name] = obj
        elif kind == "Pod":
            pods.append((where, obj))
        elif volcano_job(obj):
            vc_jobs.append((where, obj))
        elif kind == "PodGroup":
            groups.append(obj)
        elif kind == "PodDisruptionBudget":
            budgets.append((where, obj))
        elif kind in DRA_KINDS:
            pass  # read with the pods' and pending workloads' claims, below
        else:
            snap.notes.append(f"{where}: {kind} objects are not part of a snapshot; skipped")
    names = sorted(set(by_kind["NodeResourceTopology"]) | set(by_kind["Numatopology"]))
    for node_name in sorted(set(by_kind["Node"]) - set(names)):
        snap.notes.append(f"node {node_name}: no NodeResourceTopology or Numatopology object; skipped")
    shapes: dict[str, SnapshotNode] = {}
    for node_name in names:
        numatopo, topo, node = (by_kind["Numatopology"].get(node_name), by_kind["NodeResourceTopology"].get(node_name),
                                by_kind["Node"].get(node_name))
        try:
            # nodes of one pool describe the same machine: build each distinct description once
            status = get_object(node or {}, "status", f"Node {node_name}")
            used = [(numatopo or {}).get("spec"), {k: (topo or {}).get(k) for k in ("zones", "attributes",
                                                                                  "topologyPolicies")},
                    numatopo is None, topo is None, status.get("capacity"), status.get("allocatable")]
            key = json.dumps(used, sort_keys=True, default=str)
            shape = shapes.get(key)
            if shape is None:
                shape = shapes[key] = _node(node_name, numatopo, topo, node)
        except EngineError as exc:
            raise FormatError(f"{name}: node {node_name}: {exc}") from None
        labels = _labels(as_object((node or {}).get("metadata"), f"Node {node_name}: metadata"), f"Node {node_name}")
        snap.nodes[node_name] = dataclasses.replace(shape, name=node_name, labels=labels)
    snap.pods = [_pod(obj, where) for where, obj in pods]
    labelled = [disruption.LabelledPod(p.namespace, p.name, p.labels, p.phase == "Running" and bool(p.node))
                for p in snap.pods]
    snap.budgets = [disruption.budget(obj, labelled, where) for where, obj in budgets]
    _pending_jobs(snap, vc_jobs, groups, pods, name)
    try:
        snap.dra = read_state(items, {n: s.topology for n, s in snap.nodes.items()}, snap.jobs)
    except FormatError as exc:
        raise FormatError(f"{name}: {exc}") from None
    return snap


# -- nodes -------------------------------------------------------------------------------------------
def _node(name: str, numatopo: JSONObject | None, topo: JSONObject | None, node: JSONObject | None) -> SnapshotNode:
    notes: list[str] = []
    # a node whose objects state no CPU Manager policy is taken as static: the policy NUMA-aware
    # scheduling is about (what a single-file import assumes for a new node too)
    kubelet_settings: dict[str, object] = {"cpu_manager_policy": "static"}
    available: dict[int, dict[str, int]] = {}
    sources = []
    draft = None
    if numatopo is not None:
        draft, kubelet, _extra, _ = volcano_numatopo.from_object(numatopo)
        sources.append("numatopo")
        if kubelet is not None:
            kubelet_settings.update(_stated(kubelet, numatopo_policies(numatopo)))
    if topo is not None:
        nrt_draft, nrt_kubelet, zones = nrt.from_object(topo)
        sources.append("nrt")
        for zone, stats in zones.stats.items():
            available[zones.numa_id[zone]] = {res: s["available"] for res, s in stats.items()}
        if draft is None:
            draft = nrt_draft
        else:
            _merge_nrt(draft, nrt_draft, zones, notes)
        if nrt_kubelet is not None:
            k = nrt_kubelet.to_dict()
            stated = {a.get("name") for a in get_list(topo, "attributes", f"NodeResourceTopology {name}")
                      if isinstance(a, dict)}
            if "topologyManagerPolicy" in stated or topo.get("topologyPolicies"):
                kubelet_settings["topology_manager_policy"] = k["topology_manager_policy"]
            if "topologyManagerScope" in stated or topo.get("topologyPolicies"):
                kubelet_settings["topology_manager_scope"] = k["topology_manager_scope"]
            if numatopo is None:
                kubelet_settings.update({f: k[f] for f in ("reserved_cpus", "reserved_memory") if k.get(f)})
    if draft is None:  # pragma: no cover - load_snapshot builds nodes named by a topology object only
        raise FormatError(f"node {name}: neither a Numatopology nor a NodeResourceTopology")
    labels: dict[str, str] = {}
    capacity: dict[str, int] = {}
    allocatable: dict[str, int] = {}
    if node is not None:
        labels = _labels(get_object(node, "metadata", f"Node {name}"), f"Node {name}")
        status = get_object(node, "status", f"Node {name}")
        capacity = _quantities(status.get("capacity"), f"Node {name}: status.capacity")
        allocatable = _quantities(status.get("allocatable"), f"Node {name}: status.allocatable")
        _from_node_object(draft, capacity, notes)
        reserved_milli = capacity.get("cpu", 0) - allocatable.get("cpu", capacity.get("cpu", 0))
        if reserved_milli > 0 and not kubelet_settings.get("reserved_cpus") \
                and not kubelet_settings.get("reserved_cpu_milli"):
            kubelet_settings["reserved_cpu_milli"] = reserved_milli
    draft.description = f"kubectl snapshot: {' + '.join(sources)}"
    topology = build_topology(draft, name)
    kubelet = KubeletConfig.from_dict(kubelet_settings)
    return SnapshotNode(name, topology, kubelet, "+".join(sources), labels, capacity, allocatable, available,
                        notes + list(draft.notes))


def numatopo_policies(obj: JSONObject) -> set[str]:
    """The KubeletConfig fields a Numatopology states (its policies, reserved CPUs)."""
    spec = get_object(obj, "spec", "Numatopology")
    # a policy listed empty is the kubelet's default (Volcano's exporter copies the kubelet config)
    names = volcano_numatopo._POLICY_KEYS
    keys: set[str] = {names[k] for k in get_object(spec, "policies", "Numatopology: spec") if k in names}
    return keys | {"reserved_cpus", "reserved_cpu_milli"}


def _stated(kubelet: KubeletConfig, keys: set[str]) -> dict[str, object]:
    data = kubelet.to_dict()
    return {k: data[k] for k in keys if data.get(k) not in (None, "", 0)}


def _merge_nrt(draft: Draft, nrt_draft: Draft, zones: nrt.Zones, notes: list[str]) -> None:
    """Memory, hugepages, devices and distances of the NRT onto the Numatopology's CPUs."""
    per_numa: dict[int | None, int] = {}
    for rec in draft.cpus:
        per_numa[rec.numa] = per_numa.get(rec.numa, 0) + 1
    for zone, stats in zones.stats.items():
        nid = zones.numa_id[zone]
        cpus = stats.get("cpu", {}).get("capacity")
        if cpus is not None and cpus != per_numa.get(nid, 0):
            notes.append(f"NUMA {nid}: the NodeResourceTopology counts {cpus} CPUs, the Numatopology "
                         f"{per_numa.get(nid, 0)}; the Numatopology's CPUs are used")
    draft.numa_memory.update(nrt_draft.numa_memory)
    draft.numa_hugepages.update(nrt_draft.numa_hugepages)
    draft.devices.extend(nrt_draft.devices)
    if nrt_draft.distances:
        draft.distances = nrt_draft.distances


def _quantities(values: object, where: str) -> dict[str, int]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise FormatError(f"{where} must be an object")
    return {str(k): cpu_milli(v, f"{where}.{k}") if k == "cpu" else count(v, f"{where}.{k}")
            for k, v in values.items()}


def _from_node_object(draft: Draft, capacity: dict[str, int], notes: list[str]) -> None:
    """What only the Node object says: memory/hugepages split over NUMA nodes, devices without NUMA."""
    numa_ids = sorted({r.numa for r in draft.cpus if r.numa is not None} | set(draft.numa_memory))
    known_devices = {d.resource for d in draft.devices}
    for res, amount in capacity.items():
        if res == "memory" and not any(draft.numa_memory.values()) and amount:
            share, rest = divmod(amount, len(numa_ids))
            for i, nid in enumerate(numa_ids):
                draft.numa_memory[nid] = share + (rest if i == 0 else 0)
            draft.inferred.add("memory")
            notes.append("memory per NUMA node: the Node's capacity split evenly (no NRT memory zones)")
        elif res.startswith("hugepages-") and amount and not any(res in h for h in draft.numa_hugepages.values()):
            share = amount // len(numa_ids)
            for nid in numa_ids:
                draft.numa_hugepages.setdefault(nid, {})[res] = share
            draft.inferred.add("hugepages")
        elif "/" in res and res not in known_devices and amount:
            if amount > 4096:
                raise FormatError(f"Node capacity {res}: {amount} is too many devices")
            short = res.rsplit("/", 1)[-1]
            draft.devices.extend(Device(f"{short}-{k}", res, None, True, res) for k in range(amount))


# -- pods and jobs ---------------------------------------------------------------------------------
def _pod(obj: JSONObject, where: str) -> SnapshotPod:
    meta, name = _meta(obj, where)
    namespace = str(meta.get("namespace") or "default")
    try:
        pod = workloads._pod(obj, name, namespace, f"{where} {namespace}/{name}")
    except EngineError as exc:
        raise type(exc)(str(exc)) from None
    uid = str(meta.get("uid") or f"{namespace}/{name}")
    pod = dataclasses.replace(pod, uid=uid)
    spec = get_object(obj, "spec", where)
    status = get_object(obj, "status", where)
    created = str(meta.get("creationTimestamp") or "")
    out = SnapshotPod(uid, name, namespace, str(spec.get("nodeName") or ""), str(status.get("phase") or "Pending"),
                      created, pod, owner_job(meta, where), labels=_labels(meta, where))
    reason = status.get("reason")
    if out.phase == "Failed" and isinstance(reason, str) and reason in KUBELET_REJECTIONS:
        times = [str(c.get("lastTransitionTime")) for c in get_list(status, "conditions", f"{where}: status")
                 if isinstance(c, dict) and c.get("lastTransitionTime")]
        annotations = meta.get("annotations") or {}
        gang = annotations.get(GROUP_ANNOTATION) if isinstance(annotations, dict) else None
        out = dataclasses.replace(out, reason=reason, message=str(status.get("message") or ""),
                                  rejected_at=max(times, default="") or str(status.get("startTime") or "") or created,
                                  gang=str(gang) if gang else None)
    return out


def manifest_of(obj: JSONObject) -> str:
    """The stable part of an object (no status, uid, resourceVersion or timestamps), as YAML."""
    import yaml

    meta = as_object(obj.get("metadata"), "metadata")
    keep = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if meta.get(k)}
    return yaml.safe_dump({"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": keep,
                           "spec": obj.get("spec")}, sort_keys=True)


def _pending_jobs(snap: Snapshot, vc_jobs: list[tuple[str, JSONObject]], groups: list[JSONObject],
                  pods: list[tuple[str, JSONObject]], name: str) -> None:
    min_member: dict[tuple[str, str], int] = {}
    for g in groups:
        meta = get_object(g, "metadata", "PodGroup")
        where = f"PodGroup {meta.get('name')}"
        ns = str(meta.get("namespace") or "default")
        value = get_object(g, "spec", where).get("minMember")
        if value is None:
            continue
        refs = [r.get("name") for r in get_list(meta, "ownerReferences", f"{where}: metadata") if isinstance(r, dict)
                and r.get("kind") == "Job"]
        for job_name in refs or [str(meta.get("name"))]:
            min_member[(ns, str(job_name))] = workloads._int(value, f"PodGroup {meta.get('name')}: spec.minMember")
    submitted = 0
    for where, obj in vc_jobs:
        meta, job_name = _meta(obj, where)
        ns = str(meta.get("namespace") or "default")
        phase = str(get_object(get_object(obj, "status", where), "state", f"{where}: status").get("phase") or "")
        if phase not in PENDING_JOB_PHASES:
            continue
        job = workloads._object(obj, where, submitted)
        submitted += 1
        key = (ns, job_name)
        group = min_member.get(key) or next((v for (gns, gname), v in min_member.items()
                                             if gns == ns and gname.startswith(f"{job_name}-")), None)
        if group is not None:
            total = sum(t.replicas for t in job.tasks)
            if group > total:
                raise FormatError(f"{where}: PodGroup minMember {group} is more than the job's {total} replicas")
            job = dataclasses.replace(job, min_available=group)
        snap.jobs.append(job)
        snap.manifests[key] = manifest_of(obj)
    for where, obj in pods:
        meta, pod_name = _meta(obj, where)
        ns = str(meta.get("namespace") or "default")
        if not pending_pod(obj, where):
            continue
        job = workloads._object(obj, where, submitted)
        snap.jobs.append(job)
        submitted += 1
        snap.manifests[(ns, pod_name)] = manifest_of(obj)
    keys = [(j.namespace, j.name) for j in snap.jobs]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise FormatError(f"{name}: a Volcano Job and a pending pod are both named {dup[0]}/{dup[1]}")


def load_pods(data: object, name: str = "pods") -> list[Pod]:
    """The Pod objects of a kubectl output in file order, each keeping its `metadata.uid` (what the
    kubelet's state files key containers by)."""
    pods = [_pod(obj, f"{name}: item {i}").pod for i, obj in enumerate(objects(data, name)) if obj.get("kind") == "Pod"]
    if not pods:
        raise FormatError(f"{name}: no Pod objects found")
    return pods
