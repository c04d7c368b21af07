"""The snapshot's DRA state and the web's, read back from what an import keeps (`formats.claims.sources`), are one:
the claims of pending pods and of pending Volcano Jobs' task templates land on the pods' session names in both."""

from __future__ import annotations

import copy
import json

from scheduler_core.formats.claims import read_state, sources
from scheduler_core.formats.snapshot import load_snapshot
from scheduler_core.formats.workloads import load_jobs
from scheduler_core.model.jobs import Job, Task

from .objects import (
    GPU_DRIVER,
    claim,
    device,
    device_class,
    exactly,
    numatopology_node,
    pod_with_claims,
    resource_slice,
)

TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [exactly("gpu", "gpu")]}}}}
CONTAINER = {"name": "app", "image": "x", "resources": {"limits": {"cpu": "2", "memory": "1Gi"},
                                                         "claims": [{"name": "gpu"}]}}
CLAIMS = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]


def _vc_job(name: str, phase: str, replicas: int = 2) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"minAvailable": 1, "tasks": [
                {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [CONTAINER]}}},
                {"replicas": replicas, "template": {"spec": {"containers": [CONTAINER], "resourceClaims": CLAIMS}}}]},
            "status": {"state": {"phase": phase}}}


def _objects() -> list[dict]:
    pending = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": "ml"},
               "spec": {"containers": [CONTAINER], "resourceClaims": CLAIMS}, "status": {"phase": "Pending"}}
    owned = {**copy.deepcopy(pending), "metadata": {"name": "train-task1-0", "namespace": "ml",
                                                    "annotations": {"volcano.sh/job-name": "train"}}}
    return [*numatopology_node("n1"), device_class("gpu", f'device.driver == "{GPU_DRIVER}"'), TEMPLATE,
            resource_slice("n1-gpu", GPU_DRIVER, "n1", [device("gpu-0", numaNode=0), device("gpu-1", numaNode=1)]),
            claim("held", [exactly("gpu", "gpu")], reserved_for=["bound"], results=[("gpu", GPU_DRIVER, "n1",
                                                                                      "gpu-0")]),
            pod_with_claims("bound", "n1", {"gpu": "held"}), _vc_job("train", "Pending"),
            _vc_job("done", "Running"), pending, owned]


def test_the_kept_sources_give_the_snapshots_own_state(tmp_path) -> None:
    objs = _objects()
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"kind": "List", "items": objs}))
    snap = load_snapshot(path)
    kept = sources(objs)
    assert [o["kind"] for o in kept].count("Job") == 1  # the running job's claims are nobody's to place
    again = read_state(kept, {n: s.topology for n, s in snap.nodes.items()}, snap.jobs)
    assert again == snap.dra
    template = (("gpu", "one-gpu"),)
    # the task without a name is task1 (workloads' rule): its two replicas; the pending pod under its own name and
    # its one-pod job's; the Volcano Job's pending pod is already named as the session names the replica
    assert snap.dra.pod_templates == {
        ("ml", n): template for n in ("train-task1-0", "train-task1-1", "solo", "solo-pod-0", "train-task1-0")}
    assert snap.dra.pod_claims[("ml", "bound")] == (("ml", "held"),)


def test_the_sessions_jobs_name_the_pods() -> None:
    """A job given by the web (say, with more replicas than the snapshot had) gets the claims on each of its pods;
    a job the objects do not describe gets none."""
    kept = sources(_objects())
    snap_job = next(o for o in kept if o["kind"] == "Job")
    (job,) = load_jobs(json.dumps(_vc_job("train", "Pending", replicas=3)))
    other = Job("elsewhere", (Task("pod", job.tasks[0].template, 1),), namespace="ml")
    state = read_state(kept, {}, [job, other])
    assert sorted(n for ns, n in state.pod_templates) == ["solo", "train-task1-0", "train-task1-1", "train-task1-2"]
    assert snap_job["spec"]["tasks"][1] == {"replicas": 2, "template": {"spec": {"resourceClaims": CLAIMS}}}


def test_a_change_outside_the_claims_keeps_the_same_sources() -> None:
    objs = _objects()
    changed = copy.deepcopy(objs)
    for o in changed:
        if o["kind"] == "Job":
            o["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["image"] = "y"
            o["spec"]["minAvailable"] = 2
    assert sources(changed) == sources(objs)
