"""A snapshot's DRA state: its DRA objects, the claims of its pods, and the claims of its pending workloads under
the names a session gives their pods.

One reader for the snapshot (`load_snapshot`) and for the web, which keeps `sources(...)` of a snapshot and reads
them back here with the jobs of a session or comparison: both see the same claims on the same pod names, the
naming being the jobs' own (`Job.pods`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..dra.model import DraState
from ..dra.objects import DRA_KINDS, read_dra, read_pod_claims
from ..model.jobs import Job
from ..model.topology import Topology
from ._documents import JSONObject, get_list, get_object

PENDING_JOB_PHASES = ("", "Pending", "Inqueue")


def owner_job(meta: JSONObject, where: str) -> str | None:
    """The Volcano Job a pod belongs to (its annotation, else its owner reference), None for a pod of its own."""
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict) and annotations.get("volcano.sh/job-name"):
        return str(annotations["volcano.sh/job-name"])
    for ref in get_list(meta, "ownerReferences", f"{where}: metadata"):
        if isinstance(ref, dict) and ref.get("kind") == "Job" and \
                str(ref.get("apiVersion", "")).startswith("batch.volcano.sh/"):
            return str(ref.get("name"))
    return None


def pending_pod(obj: JSONObject, where: str) -> bool:
    """A pod the snapshot turns into a job of its own: pending, bound to no node, of no Volcano Job."""
    phase = str(get_object(obj, "status", where).get("phase") or "Pending")
    return phase == "Pending" and not get_object(obj, "spec", where).get("nodeName") and \
        owner_job(get_object(obj, "metadata", where), where) is None


def volcano_job(obj: JSONObject) -> bool:
    return obj.get("kind") == "Job" and str(obj.get("apiVersion", "")).startswith("batch.volcano.sh/")


def sources(objects: Iterable[JSONObject]) -> list[JSONObject]:
    """What `read_state` needs of a snapshot's objects: the DRA objects whole; of each pod with claims its metadata,
    claims, node and phase; of each pending Volcano Job with task-template claims its tasks' names, replicas and
    claims (nothing else of the workloads, so a change elsewhere in them leaves these the same)."""
    out: list[JSONObject] = []
    for obj in objects:
        kind, spec, status = obj.get("kind"), obj.get("spec"), obj.get("status")
        status = status if isinstance(status, dict) else {}
        if kind in DRA_KINDS:
            out.append(obj)
        elif kind == "Pod" and isinstance(spec, dict) and spec.get("resourceClaims"):
            out.append({"kind": "Pod", "metadata": obj.get("metadata"),
                        "spec": {"resourceClaims": spec["resourceClaims"], "nodeName": spec.get("nodeName") or ""},
                        "status": {k: status[k] for k in ("phase", "resourceClaimStatuses") if k in status}})
        elif volcano_job(obj) and isinstance(spec, dict) and _job_phase(obj) in PENDING_JOB_PHASES:
            tasks = [t if isinstance(t, dict) else {} for t in spec.get("tasks") or []]
            claims = [_template_spec(t).get("resourceClaims") for t in tasks]
            if any(claims):
                out.append({"apiVersion": obj["apiVersion"], "kind": "Job", "metadata": obj.get("metadata"),
                            "spec": {"tasks": [{**{k: t[k] for k in ("name", "replicas") if k in t},
                                                "template": {"spec": {"resourceClaims": c or []}}}
                                               for t, c in zip(tasks, claims, strict=True)]},
                            "status": {"state": {"phase": _job_phase(obj)}}})
    return out


def read_state(objects: Sequence[JSONObject], topologies: Mapping[str, Topology], jobs: Iterable[Job]) -> DraState:
    """The DRA state of a snapshot's `objects` (all of them, or their `sources`): the DRA objects (`topologies`
    place devices published with a pcieRoot only), every pod's claims, and for each of `jobs` made from a pending
    pod or a pending Volcano Job, the claims its pods carry in a session (a pending pod's under its own name too)."""
    state = read_dra([o for o in objects if o.get("kind") in DRA_KINDS], topologies)
    by_key = {(j.namespace, j.name): j for j in jobs}
    for i, obj in enumerate(objects):
        where = f"item {i} ({obj.get('kind')})"
        if obj.get("kind") == "Pod":
            read_pod_claims(state, obj, where)
            if pending_pod(obj, where) and (job := by_key.get(_key(obj, where))) is not None:
                _renamed(state, _key(obj, where), job)
        elif volcano_job(obj) and (job := by_key.get(_key(obj, where))) is not None:
            _task_claims(state, obj, job, where)
    return state


def _key(obj: JSONObject, where: str) -> tuple[str, str]:
    meta = get_object(obj, "metadata", where)
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _job_phase(obj: JSONObject) -> str:
    status = obj.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    return str(state.get("phase") or "") if isinstance(state, dict) else ""


def _template_spec(task: JSONObject) -> JSONObject:
    template = task.get("template")
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


def _renamed(state: DraState, key: tuple[str, str], job: Job) -> None:
    """A pending pod's claims under the name its one-pod job gives it in a session."""
    for claims in (state.pod_claims, state.pod_templates):
        if key in claims:
            for _task, pod in job.pods():
                claims.setdefault((key[0], pod.name), claims[key])


def _task_claims(state: DraState, obj: JSONObject, job: Job, where: str) -> None:
    """The claims of a Volcano Job's task templates (`spec.tasks[].template.spec.resourceClaims`), for each of
    the task's pods by the name a session gives it."""
    tasks = {str(t.get("name") or f"task{i}"): t for i, t in enumerate(get_list(get_object(obj, "spec", where),
                                                                               "tasks", where)) if isinstance(t, dict)}
    for task, pod in job.pods():
        spec = get_object(get_object(tasks.get(task.name, {}), "template", where), "spec", where)
        if spec.get("resourceClaims"):
            read_pod_claims(state, {"metadata": {"name": pod.name, "namespace": job.namespace}, "spec": spec},
                            f"{where}: task {task.name}")
