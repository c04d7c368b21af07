"""Sessions with claims: upstream's NUMA-blind allocation under `volcano` and `unaware`, devices on the pod's
NUMA nodes under `aligned` (another node when the task policy asks for alignment), the explanation's devices,
reasons and alignment, and claims given back when a gang rolls back."""

from __future__ import annotations

import pytest

from scheduler_core import Cluster, Container, Job, KubeletConfig, Node, Pod, Task, run_session
from scheduler_core.dra.objects import read_dra, read_pod_claims
from scheduler_core.model.topology import synthetic

from .objects import GPU_DRIVER, device, device_class, exactly, pod_with_claims, resource_slice

CLASS = device_class("gpu.example.com", f'device.driver == "{GPU_DRIVER}"')
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [exactly("gpu", "gpu.example.com")]}}}}


def _node(name: str) -> Node:
    # NUMA 0: CPUs 0-3, NUMA 1: CPUs 4-7 with 4-5 reserved, so a 3-CPU pod is pinned on NUMA 0
    return Node(name, synthetic(1, 2, 4, 1, memory_per_numa=8 << 30),
                KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node",
                              reserved_cpus="4-5"))


def _job(name: str, replicas: int = 1, policy: str = "single-numa-node", gpus: int = 1,
         min_available: int | None = None) -> Job:
    pod = Pod("p", (Container.guaranteed("app", cpu_milli=3000, memory=1 << 30),))
    return Job(name, (Task("w", pod, replicas=replicas, topology_policy=policy),), namespace="ml",
               min_available=min_available)


def _state(gpus_by_node: dict[str, list[int]], jobs: list[Job], template: dict = TEMPLATE):
    objs = [CLASS, template]
    for node, numas in gpus_by_node.items():
        objs.append(resource_slice(f"{node}-gpu", GPU_DRIVER, node,
                                   [device(f"gpu-{i}", numaNode=n) for i, n in enumerate(numas)]))
    state = read_dra(objs)
    for job in jobs:
        for _task, pod in job.pods():
            read_pod_claims(state, pod_with_claims(pod.name, "", {}, templates={"gpu": "one-gpu"}), "pod")
    return state


@pytest.mark.parametrize("profile", ["volcano", "unaware"])
def test_upstream_profiles_take_the_first_device_blind_to_numa(profile: str) -> None:
    jobs = [_job("train")]
    state = _state({"n1": [1, 0]}, jobs)
    result = run_session(Cluster([_node("n1")]), jobs, profile=profile, dra=state).to_dict()
    (pod,) = result["pods"]
    assert pod["admitted_numa"] == [0]
    dra = pod["dra"]
    assert [(d["device"], d["numa"]) for c in dra["claims"] for d in c["devices"]] == [("gpu-0", 1)]
    assert dra["claims"][0]["claim"] == "ml/train-w-0-gpu" and dra["claims"][0]["template"] == "one-gpu"
    assert dra["alignment"] == {"aligned": False, "kinds": ["gpu-cpu"]}
    assert "NUMA is not considered" in dra["why"] and dra["numa"] == [1]


def test_aligned_takes_the_device_on_the_numa_node_the_kubelet_pins() -> None:
    jobs = [_job("train")]
    result = run_session(Cluster([_node("n1")]), jobs, profile="aligned", dra=_state({"n1": [1, 0]}, jobs)).to_dict()
    dra = result["pods"][0]["dra"]
    assert [d["device"] for d in dra["claims"][0]["devices"]] == ["gpu-1"]
    assert dra["alignment"] == {"aligned": True, "kinds": []}
    assert dra["why"].startswith("aligned: devices on NUMA 0")


def test_aligned_moves_a_pod_that_asks_for_alignment_to_a_node_where_it_gets_it() -> None:
    jobs = [_job("strict"), _job("loose", policy="best-effort")]
    state = _state({"n1": [1], "n2": [0]}, jobs)
    result = run_session(Cluster([_node("n1"), _node("n2")]), jobs, profile="aligned", dra=state).to_dict()
    by_job = {p["job"]: p for p in result["pods"]}
    assert by_job["strict"]["node"] == "n2" and by_job["strict"]["dra"]["alignment"]["aligned"]
    # the best-effort pod takes n1, the node by name, with upstream's device there, and says why
    assert by_job["loose"]["node"] == "n1"
    assert by_job["loose"]["dra"]["why"].startswith("no allocation on NUMA 0 exists on this node")
    assert by_job["loose"]["dra"]["alignment"]["kinds"] == ["gpu-cpu"]


def test_a_pod_whose_claims_fit_nowhere_is_unschedulable_with_upstreams_reason() -> None:
    jobs = [_job("big")]
    template = {**TEMPLATE, "spec": {"spec": {"devices": {"requests": [exactly("gpu", "gpu.example.com", 2)]}}}}
    result = run_session(Cluster([_node("n1")]), jobs, dra=_state({"n1": [0]}, jobs, template)).to_dict()
    (pod,) = result["pods"]
    assert (pod["status"], pod["node"], pod["dra"]) == ("unschedulable", None, None)
    assert pod["message"] == "0/1 nodes are unavailable: 1 cannot allocate all claims."


def test_a_rolled_back_gang_gives_its_devices_back() -> None:
    gang, single = _job("gang", replicas=2, min_available=2), _job("single")
    jobs = [gang, single]
    result = run_session(Cluster([_node("n1")]), jobs, dra=_state({"n1": [0]}, jobs)).to_dict()
    by_pod = {p["pod"]: p for p in result["pods"]}
    assert by_pod["gang-w-0"]["status"] == "rolled_back"
    assert by_pod["single-w-0"]["status"] == "admitted"
    assert by_pod["single-w-0"]["dra"]["claims"][0]["devices"][0]["device"] == "gpu-0"


def test_devices_other_claims_hold_are_not_taken_and_pods_without_claims_have_none() -> None:
    jobs = [_job("train"), _job("zplain")]
    state = _state({"n1": [0, 0]}, jobs[:1])
    state.claims[("ml", "running")] = read_dra([{
        "kind": "ResourceClaim", "metadata": {"name": "running", "namespace": "ml"},
        "spec": {"devices": {"requests": [exactly("gpu", "gpu.example.com")]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": GPU_DRIVER, "pool": "n1", "device": "gpu-0"}]}}}}]).claims[("ml", "running")]
    result = run_session(Cluster([_node("n1"), _node("n2")]), jobs, dra=state).to_dict()
    by_job = {p["job"]: p for p in result["pods"]}
    assert by_job["train"]["node"] == "n1"  # the only node with GPUs
    assert by_job["train"]["dra"]["claims"][0]["devices"][0]["device"] == "gpu-1"
    assert (by_job["zplain"]["status"], by_job["zplain"]["dra"]) == ("admitted", None)


def test_a_comparison_counts_misaligned_pods_per_variant() -> None:
    from scheduler_core.scheduler.compare import Variant, run_variant

    jobs = [_job("train"), _job("serve")]
    state = _state({"n1": [1, 0, 1, 0]}, jobs)
    upstream = run_variant([_node("n1")], jobs, Variant("volcano"), dra=state)["metrics"]
    aligned = run_variant([_node("n1")], jobs, Variant("aligned"), dra=state)["metrics"]
    # one 3-CPU pod fits the node (on NUMA 0); upstream gives it gpu-0 on NUMA 1, aligned gpu-1 on NUMA 0
    assert upstream["pods_with_claims"] == aligned["pods_with_claims"] == 1
    assert (upstream["pods_misaligned"], upstream["misaligned_kinds"]) == (1, {"gpu-cpu": 1})
    assert (aligned["pods_misaligned"], aligned["misaligned_kinds"]) == (0, {})
    assert "pods_misaligned" not in run_variant([_node("n1")], jobs, Variant("volcano"))["metrics"]


def test_a_snapshots_pending_work_brings_its_claims_into_the_session(tmp_path) -> None:
    import json

    from scheduler_core.formats.snapshot import load_snapshot

    from .objects import numatopology_node

    container = {"name": "app", "image": "x", "resources": {"limits": {"cpu": "2", "memory": "1Gi"},
                                                             "claims": [{"name": "gpu"}]}}
    claims = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    vc_job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
              "metadata": {"name": "train", "namespace": "ml"},
              "spec": {"minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {
                  "spec": {"containers": [container], "resourceClaims": claims}}}]},
              "status": {"state": {"phase": "Pending"}}}
    pending = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": "ml"},
               "spec": {"containers": [container], "resourceClaims": claims}, "status": {"phase": "Pending"}}
    objs = [*numatopology_node("n1"), CLASS, TEMPLATE, resource_slice("n1-gpu", GPU_DRIVER, "n1",
                                                                      [device("gpu-0", numaNode=0),
                                                                       device("gpu-1", numaNode=1)]),
            vc_job, pending]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"kind": "List", "items": objs}))
    snap = load_snapshot(path)
    cluster = Cluster([Node(n, s.topology, s.kubelet) for n, s in snap.nodes.items()])
    result = run_session(cluster, snap.jobs, dra=snap.dra).to_dict()
    got = {p["job"]: [d["device"] for c in p["dra"]["claims"] for d in c["devices"]] for p in result["pods"]}
    assert sorted(got) == ["solo", "train"]
    assert sorted(got["solo"] + got["train"]) == ["gpu-0", "gpu-1"]  # one GPU each, never the same


def test_a_pod_whose_template_or_claim_is_missing_waits_as_upstreams_scheduler_does() -> None:
    jobs = [_job("train"), _job("named")]
    state = _state({"n1": [0]}, jobs[:1], template={**TEMPLATE, "metadata": {"name": "other", "namespace": "ml"}})
    read_pod_claims(state, pod_with_claims("named-w-0", "", {"gpu": "nowhere"}), "pod")
    result = run_session(Cluster([_node("n1"), _node("n2")]), jobs, dra=state).to_dict()
    by_job = {p["job"]: p for p in result["pods"]}
    assert by_job["train"]["message"] == ('0/2 nodes are unavailable: 2 resourceclaimtemplate.resource.k8s.io '
                                          '"one-gpu" not found.')
    assert by_job["named"]["status"] == "unschedulable"
    assert 'resourceclaim.resource.k8s.io "nowhere" not found' in by_job["named"]["message"]
