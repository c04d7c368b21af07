"""scheduler_core.scheduler.compare: variants and their overrides, metrics that tell profiles apart, single-NUMA
blocks, and headroom checked against what a session of that many more pods really does."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.errors import EngineError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.compare import (
    Shape,
    Variant,
    block_histogram,
    headroom,
    numa_use,
    run_variant,
    span_histogram,
)
from scheduler_core.scheduler.profiles import PROFILES, AlignedProfile
from scheduler_core.scheduler.session import run_session

GiB = 2**30
GPU = "nvidia.com/gpu"
SNN = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node")


def job(i: int, cpus: int, gpus: int = 0, policy: str | None = "single-numa-node", replicas: int = 1) -> Job:
    pod = Pod("p", (Container.guaranteed("app", cpus * 1000, GiB, devices={GPU: gpus} if gpus else None),))
    return Job(f"j{i}", (Task("t", pod, replicas, policy),), min_available=1, submitted=i)


def affinity_workload() -> tuple[list[Node], list[Job]]:
    """Built so the three profiles differ in TopologyAffinityErrors (aligned 0 < volcano < unaware).

    a-gpu (2 NUMA × 4 CPUs, a GPU on each): j0 (1 CPU + GPU) takes NUMA 0's GPU, j1 (4 CPUs) all of
    NUMA 1; j2 (2 CPUs + GPU) then has CPUs only on NUMA 0 and a GPU only on NUMA 1. Volcano looks at
    CPUs alone and unaware at counts alone: both place it there and the kubelet refuses it.
    b-cpu (2 × 4, no GPU): j3 and j4 (3 CPUs each) leave one CPU per NUMA node; j5 (2 CPUs) fits by
    count, and only unaware sends it there (volcano filters the node: task policy best-effort ≠
    the node's single-numa-node)."""
    gpu = synthetic(1, 2, 4, 1, memory_per_numa=16 * GiB, devices_per_numa={GPU: 1})
    nodes = [Node("a-gpu", gpu, SNN), Node("b-cpu", synthetic(1, 2, 4, 1, memory_per_numa=16 * GiB), SNN)]
    jobs = [job(0, 1, 1), job(1, 4), job(2, 2, 1), job(3, 3), job(4, 3), job(5, 2, policy="best-effort")]
    return nodes, jobs


def test_affinity_errors_aligned_none_volcano_some_unaware_more():
    nodes, jobs = affinity_workload()
    errors = {p: run_variant(nodes, jobs, Variant(p))["metrics"]["topology_affinity_errors"] for p in PROFILES}
    assert errors["aligned"] == 0
    assert 0 < errors["volcano"] < errors["unaware"]
    assert {p: errors[p] for p in ("aligned", "volcano", "unaware")} == {"aligned": 0, "volcano": 1, "unaware": 2}
    # koordinator: LeastAllocated spreads the pods, so none lands where the kubelet refuses it
    assert errors["kai"] == 0 and errors["koordinator"] == 0


def test_every_kubelet_refusal_is_counted_by_reason_and_headroom_is_net_of_them():
    """full-pcpus-only on 2-thread cores: a 1-CPU pod is refused with SMTAlignmentError. Volcano (CPU hints only,
    no CPU Manager options) and unaware place such pods; aligned never does. The by-reason counts add up to the
    refusals, and headroom splits into what the kubelet admits and what it refuses."""
    smt = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node",
                        cpu_manager_options={"full-pcpus-only": "true"})
    nodes = [Node("c-smt", synthetic(1, 2, 2, 2, memory_per_numa=16 * GiB), smt)]
    shape = Shape.parse("1", "1Gi", policy="single-numa-node")
    out = {p: run_variant(nodes, [job(0, 1), job(1, 2), job(2, 1)], Variant(p), shape)["metrics"] for p in PROFILES}
    for m in out.values():
        assert sum(m["admission_errors_by_reason"].values()) == m["pods_rejected"] \
            == m["topology_affinity_errors"] + m["admission_errors"] == m["pods_placed"] - m["pods_admitted"]
        assert m["headroom_admitted"] + m["headroom_rejected"] == m["headroom"]
        assert m["policy_nodes"] == {"single-numa-node": 1}
    assert (out["aligned"]["pods_placed"], out["aligned"]["pods_rejected"]) == (1, 0)  # the 2-CPU pod only
    assert out["aligned"]["admission_errors_by_reason"] == {} and out["aligned"]["headroom"] == 0
    for p in ("volcano", "unaware"):  # both 1-CPU pods placed and refused; 4 more "fit", all refused
        assert (out[p]["pods_placed"], out[p]["pods_admitted"]) == (3, 1)
        assert out[p]["admission_errors_by_reason"] == {"SMTAlignmentError": 2}
        assert (out[p]["headroom"], out[p]["headroom_admitted"], out[p]["headroom_rejected"]) == (4, 0, 4)


def test_volcanos_policy_filter_is_counted_and_the_nodes_by_policy_reported():
    """affinity_workload's j5 (best-effort) meets only single-numa-node nodes: Volcano's filter turns it away."""
    nodes, jobs = affinity_workload()
    out = {p: run_variant(nodes, jobs, Variant(p))["metrics"] for p in PROFILES}
    assert out["volcano"]["pods_unplaced_policy_filter"] == 1
    assert out["aligned"]["pods_unplaced_policy_filter"] == out["unaware"]["pods_unplaced_policy_filter"] == 0
    assert out["volcano"]["admission_errors_by_reason"] == {"TopologyAffinityError": 1}
    assert out["unaware"]["admission_errors_by_reason"] == {"TopologyAffinityError": 2}
    best = run_variant(nodes, jobs, Variant("volcano", topology_manager_policy="best-effort"))["metrics"]
    assert best["policy_nodes"] == {"best-effort": 2} and out["volcano"]["policy_nodes"] == {"single-numa-node": 2}


def test_run_variant_leaves_the_snapshot_alone_and_reports_the_metrics():
    nodes, jobs = affinity_workload()
    before = [(n.name, n.free_cpus, len(n.allocations), n.kubelet) for n in nodes]
    out = run_variant(nodes, jobs, Variant("aligned"), Shape.parse("1", "1Gi", policy="single-numa-node"))
    assert [(n.name, n.free_cpus, len(n.allocations), n.kubelet) for n in nodes] == before
    m = out["metrics"]
    assert (m["pods"], m["pods_placed"], m["pods_unplaced"], m["pods_admitted"]) == (6, 5, 1, 5)
    assert (m["jobs"], m["jobs_committed"], m["jobs_rolled_back"]) == (6, 5, 1)
    assert m["pods_multi_numa"] == 0 and m["mean_numa_distance"] == 10.0
    # aligned: j0 (1 CPU) + j1 (4) + j3 (3) on a-gpu, j4 (3) + j5 (2) on b-cpu: 3 CPUs left
    by_node = {n["node"]: n for n in out["nodes"]}
    assert by_node["a-gpu"]["numa"] == [[0, 4], [0, 4]]
    assert sorted(f for f, _c in by_node["b-cpu"]["numa"]) == [1, 2]
    assert m["free_cpus"] == 3 and m["free_single_numa_blocks"] == 2
    assert m["block_histogram"]["0"] == 2 and m["block_histogram"]["1"] == 1 and m["block_histogram"]["2-3"] == 1
    # headroom for 1 CPU + 1Gi single-numa-node on what is left: the three free CPUs
    assert m["headroom"] == 3 and by_node["b-cpu"]["headroom"] == 3 and by_node["a-gpu"]["headroom"] == 0


def test_gang_rollback_counts_as_a_rolled_back_job():
    node = Node("n", synthetic(1, 2, 4, 1, memory_per_numa=16 * GiB), SNN)
    gang = Job("gang", (Task("t", job(0, 4).tasks[0].template, 3, "single-numa-node"),), min_available=3)
    m = run_variant([node], [gang, job(1, 2)], Variant("aligned"))["metrics"]
    assert (m["jobs_committed"], m["jobs_rolled_back"]) == (1, 1)
    assert m["pods_placed"] == 1  # the gang's two placed pods were rolled back


def test_multi_numa_pods_and_their_mean_distance():
    """best-effort lets an 8-CPU pod span both NUMA nodes of a 2 × 4 machine: distance (10+21+21+10)/4."""
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="best-effort")
    topo = synthetic(2, 1, 4, 1, memory_per_numa=16 * GiB)
    m = run_variant([Node("n", topo, kubelet)], [job(0, 8, policy="best-effort")], Variant("aligned"))["metrics"]
    assert m["pods_multi_numa"] == 1
    assert m["mean_numa_distance"] == 15.5 == topo.mean_distance(0b11)
    assert topo.mean_distance(0b01) == 10.0 and topo.mean_distance(0) is None


def test_numa_use_counts_reserved_cpus_out_and_the_histogram_bins_blocks():
    topo = synthetic(1, 2, 4, 2)  # 16 CPUs, 8 per NUMA node
    kubelet = KubeletConfig(cpu_manager_policy="static", reserved_cpus=CPUSet.parse("0"))
    node = Node("n", topo, kubelet, [Allocation("default/p", "c", CPUSet(topo.numa_cpus[1]))])
    assert numa_use(node) == [[7, 7], [0, 8]]
    assert block_histogram([numa_use(node), [[64, 64], [3, 8]]]) == {
        "0": 1, "1": 0, "2-3": 1, "4-7": 1, "8-15": 0, "16-31": 0, "32-63": 0, "64+": 1}


def test_variant_overrides_every_node_and_keeps_the_inputs():
    nodes, _jobs = affinity_workload()
    variant = Variant.from_dict({"profile": "volcano", "topology_manager_policy": "best-effort",
                                 "topology_manager_scope": "pod", "cpu_manager_options": {"full-pcpus-only": "true"},
                                 "weight": 3})
    changed = variant.apply(nodes)
    assert {(n.kubelet.topology_manager_policy, n.kubelet.topology_manager_scope,
             n.kubelet.cpu_manager_options.full_pcpus_only) for n in changed} == {("best-effort", "pod", True)}
    assert {n.kubelet.topology_manager_policy for n in nodes} == {"single-numa-node"}
    assert variant.label == "volcano · best-effort/pod · full-pcpus-only · weight 3"
    assert Variant.from_dict(variant.to_dict()) == variant
    # the override decides: with best-effort everywhere the GPU pod is admitted across NUMA nodes
    nodes, jobs = affinity_workload()
    assert run_variant(nodes, jobs, variant)["metrics"]["topology_affinity_errors"] == 0


def test_an_override_a_node_cannot_take_names_the_node():
    node = Node("n1", synthetic(1, 2, 4, 1), KubeletConfig(cpu_manager_policy="static",
                                                           cpu_manager_options={"align-by-socket": "true"}))
    with pytest.raises(EngineError, match="node n1: Topolgy manager single-numa-node policy is incompatible with "
                                          "CPUManager align-by-socket"):
        Variant("aligned", topology_manager_policy="single-numa-node").apply([node])


@pytest.mark.parametrize("data, field", [
    ({"profile": "fast"}, "profile"), ({}, "profile"), ({"profile": "aligned", "colour": 1}, "colour"),
    ({"profile": "aligned", "topology_manager_policy": "strict"}, "topology_manager_policy"),
    ({"profile": "aligned", "topology_manager_scope": "node"}, "topology_manager_scope"),
    ({"profile": "aligned", "cpu_manager_options": {"turbo": "true"}}, "cpu_manager_options"),
    ({"profile": "aligned", "cpu_manager_options": "full-pcpus-only"}, "cpu_manager_options"),
    ({"profile": "volcano", "weight": -1}, "weight"), ({"profile": "volcano", "weight": "2"}, "weight"),
    ({"profile": "volcano", "distance_tie_break": True}, "distance_tie_break"),
    ({"profile": "aligned", "distance_tie_break": "yes"}, "distance_tie_break"), ("aligned", "variant"),
])
def test_bad_variants_name_the_field(data, field):
    with pytest.raises(EngineError, match=field):
        Variant.from_dict(data)


def test_shape_parsing():
    shape = Shape.parse("4", "8Gi", "nvidia.com/gpu=1, example.com/nic=2", "single-numa-node")
    assert shape == Shape(4000, 8 * GiB, (("example.com/nic", 2), ("nvidia.com/gpu", 1)), "single-numa-node")
    assert shape.to_dict() == {"cpu": "4", "memory": "8Gi", "devices": {"example.com/nic": 2, "nvidia.com/gpu": 1},
                               "policy": "single-numa-node"}
    assert shape.pod().qos_class == "Guaranteed"
    assert Shape.parse("1500m").to_dict()["cpu"] == "1500m"
    for args, field in [(("",), "cpu"), (("0",), "cpu"), (("1m",), "cpu"), (("999m",), "cpu"), (("x",), "cpu"),
                        (("1", "lots"), "memory"),
                        (("1", None, "gpu"), "devices"), (("1", None, "memory=1"), "devices"),
                        (("1", None, "nvidia.com/gpu=half"), "devices"), (("1", None, None, "tight"), "policy")]:
        with pytest.raises(EngineError, match=field):
            Shape.parse(*args)


# -- headroom against reality ------------------------------------------------------------------------
def headroom_cluster() -> Cluster:
    """Mixed policies, a GPU node, some CPUs already held: room depends on profile and shape."""
    gpu = synthetic(2, 2, 4, 2, memory_per_numa=32 * GiB, devices_per_numa={GPU: 1})
    plain = synthetic(2, 1, 6, 1, memory_per_numa=16 * GiB)
    be = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="best-effort")
    restricted = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted",
                               topology_manager_scope="pod", reserved_cpus=CPUSet.parse("0"))
    return Cluster([
        Node("gpu-1", gpu, restricted, [Allocation("default/x", "c", CPUSet.parse("1-5"))]),
        Node("gpu-2", gpu, SNN),
        Node("plain-1", plain, be, [Allocation("default/y", "c", CPUSet.parse("0-2,6"))]),
        Node("plain-2", plain, SNN),
    ])


def session_of(shape: Shape, replicas: int, cluster: Cluster, profile: str):
    job = Job("check", (Task("pod", shape.pod(), replicas, shape.policy),), min_available=min(1, replicas))
    return run_session(cluster.copy(), [job], profile=profile)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("shape", [
    Shape.parse("4", "8Gi", policy="single-numa-node"),
    Shape.parse("3", "2Gi", policy="best-effort"),
    Shape.parse("2", "4Gi", {GPU: 1}, "restricted"),
    Shape.parse("1500m", "1Gi"),
])
def test_headroom_plus_five_places_exactly_headroom(profile, shape):
    cluster = headroom_cluster()
    room = headroom(cluster, shape, profile)
    assert room["total"] > 0
    result = session_of(shape, room["total"] + 5, cluster, profile)
    assert result.counts["placed"] == room["total"]
    per_node = {}
    for p in result.pods:
        if p.placed:
            per_node[p.node] = per_node.get(p.node, 0) + 1
    assert per_node == {n["node"]: n["count"] for n in room["nodes"] if n["count"]}
    assert room["rejected"] == result.counts["topology_affinity_errors"] + result.counts["admission_errors"]
    again = headroom(cluster, shape, profile)  # deterministic, and the cluster was left as it was
    assert {**again, "engine_s": 0} == {**room, "engine_s": 0}


def test_headroom_leaves_the_cluster_alone_and_is_zero_when_nothing_fits():
    cluster = headroom_cluster()
    free = {n: node.free_cpus for n, node in cluster.nodes.items()}
    room = headroom(cluster, Shape.parse("64", "1Gi"), "aligned")
    assert room["total"] == 0 and room["bound"] == 0 and all(n["count"] == 0 for n in room["nodes"])
    headroom(cluster, Shape.parse("1", "1Gi"), "unaware")
    assert {n: node.free_cpus for n, node in cluster.nodes.items()} == free


def test_headroom_stops_at_its_pod_and_time_bounds_and_says_at_least():
    cluster = headroom_cluster()
    shape = Shape.parse("1", "1Gi")
    full = headroom(cluster, shape, "aligned")
    assert full["total"] > 10 and not full["at_least"] and not any(n["at_least"] for n in full["nodes"])
    assert headroom(cluster, shape, "aligned", max_pods=full["total"], seconds=60)["at_least"] is False
    capped = headroom(cluster, shape, "aligned", max_pods=7)
    assert capped["total"] == 7 and capped["at_least"] and capped["stopped"] == "limit of 7 pods tried"
    assert sum(n["count"] for n in capped["nodes"]) == 7
    for n in capped["nodes"]:  # a node counted whole is exact; one cut short (or never tried) is "at least"
        assert n["count"] <= {m["node"]: m["count"] for m in full["nodes"]}[n["node"]]
    assert any(n["at_least"] for n in capped["nodes"])
    late = headroom(cluster, shape, "aligned", seconds=0)
    assert late["total"] == 0 and late["sessions"] == 0 and late["stopped"] == "time budget of 0 s"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cpus=st.integers(1, 8), memory=st.sampled_from([0, 1, 3, 9]), gpus=st.integers(0, 2),
       policy=st.sampled_from([None, "none", "best-effort", "restricted", "single-numa-node"]),
       profile=st.sampled_from(list(PROFILES)))
def test_headroom_matches_a_session_for_any_shape(cpus, memory, gpus, policy, profile):
    shape = Shape(cpus * 1000, memory * GiB, ((GPU, gpus),) if gpus else (), policy)
    cluster = headroom_cluster()
    room = headroom(cluster, shape, profile)
    assert session_of(shape, room["total"] + 5, cluster, profile).counts["placed"] == room["total"]


def test_distance_tie_break_prefers_the_closer_of_equally_narrow_placements():
    """An 8-CPU pod spans two NUMA nodes on either machine: across sockets on `a` (distance 21),
    within a socket on `b` (12). By name `a` wins; the aligned tie-break picks `b`."""
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted")
    nodes = [Node("a", synthetic(2, 1, 4, 1, memory_per_numa=16 * GiB), kubelet),
             Node("b", synthetic(1, 2, 4, 1, memory_per_numa=16 * GiB), kubelet)]
    jobs = [job(0, 8, policy="restricted")]
    plain = run_variant(nodes, jobs, Variant("aligned"))
    closest = run_variant(nodes, jobs, Variant("aligned", distance_tie_break=True))
    assert plain["metrics"]["mean_numa_distance"] == 15.5 and closest["metrics"]["mean_numa_distance"] == 11.0
    assert [n["numa"] for n in closest["nodes"]] == [[[4, 4], [4, 4]], [[0, 4], [0, 4]]]
    assert run_session(Cluster(nodes), jobs, profile=AlignedProfile(distance_tie_break=True)).pods[0].node == "b"
    assert run_session(Cluster(nodes), jobs, profile="aligned").pods[0].node == "a"


def test_span_histogram_counts_pods_by_numa_nodes_spanned():
    assert span_histogram([0b1, 0b10, 0b11, None, 0, 0b1111, 0b11111, 0b101]) == {
        "1": 2, "2": 2, "3": 0, "4+": 2, "shared pool": 1, "not admitted": 1}
