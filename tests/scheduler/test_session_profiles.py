"""The profiles: `aligned` never gets a TopologyAffinityError from the kubelet (property test),
`unaware` does on a workload built to show it, and the counts of all three are compared."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import CPU, Topology, synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.profiles import PROFILES
from scheduler_core.scheduler.session import run_session

GiB = 2**30
GPU = "nvidia.com/gpu"


def upstream_8cpu() -> Topology:
    return Topology([CPU(i, i // 2, i // 4, i // 4, i // 4) for i in range(8)])


def fragmenting_workload() -> tuple[list[Node], list[Job]]:
    """Two single-numa-node nodes of 2 NUMA × 4 CPUs; pods of 3, 3 and 2 CPUs. By CPU count alone
    the 2-CPU pod fits next to the two 3-CPU pods (6 of 8 CPUs used), but the 2 free CPUs are on
    different NUMA nodes, so the kubelet rejects it there."""
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node")
    nodes = [Node(f"n{i}", upstream_8cpu(), kubelet) for i in range(2)]
    jobs = []
    for i, cpus in enumerate((3, 3, 2)):
        pod = Pod("t", (Container.guaranteed("app", cpus * 1000, GiB),))
        jobs.append(Job(f"j{i}", (Task("t", pod, 1, "single-numa-node"),), min_available=1, submitted=i))
    return nodes, jobs


def test_unaware_gets_topology_affinity_errors_where_numa_aware_profiles_do_not():
    counts = {}
    for profile in ("volcano", "aligned", "unaware", "kai", "koordinator"):
        nodes, jobs = fragmenting_workload()
        result = run_session(Cluster(nodes), jobs, profile=profile)
        counts[profile] = result.counts["topology_affinity_errors"]
        if profile == "unaware":
            rejected = result.pod("j2-t-0")
            assert rejected.node == "n0" and rejected.status == "rejected"
            assert rejected.kubelet_reason == "TopologyAffinityError"
        elif profile == "koordinator":
            # koordlet publishes container-scope single-numa-node as SingleNUMANodeContainerLevel, which the
            # plugin does not map to a policy: no NUMA filter, but LeastAllocated spreads j1 to n1, so j2
            # (2 CPUs) still finds a whole NUMA node free on n0
            assert [p.node for p in result.pods] == ["n0", "n1", "n0"]
            assert result.counts["admitted"] == 3
        else:
            assert result.pod("j2-t-0").node == "n1"
            assert result.counts["admitted"] == 3
    assert counts == {"volcano": 0, "aligned": 0, "unaware": 1, "kai": 0, "koordinator": 0}


def test_nrt_over_reserves_what_it_placed_in_every_zone():
    """NodeResourceTopologyMatch cannot know which zone the kubelet gave a pod until the exporter
    publishes again: its cache takes each placed pod from every zone of the node. After a 3-CPU pod
    on each node (zones of 4 CPUs), both zones of both nodes count 1 CPU free, so the 2-CPU pod is
    refused everywhere although each node has a zone with 4 free CPUs, and nothing is rejected."""
    nodes, jobs = fragmenting_workload()
    result = run_session(Cluster(nodes), jobs, profile="nrt")
    assert [result.pod(f"j{i}-t-0").node for i in range(3)] == ["n0", "n1", None]
    refused = result.pod("j2-t-0")
    assert refused.status == "unschedulable"
    assert refused.message == "0/2 nodes are unavailable: 2 cannot align container: container app, resource cpu."
    assert result.counts["topology_affinity_errors"] == 0 and result.counts["admitted"] == 2
    # LeastAllocated on the first pod: (4 - 3) * 100 // 4 in its best zone (the nodes state no memory)
    assert result.pod("j0-t-0").score == 25


def test_volcano_misses_device_alignment_that_aligned_sees():
    """Volcano aligns CPUs only: a restricted node whose only free GPU sits on the other NUMA node
    passes its predicate, and the kubelet then rejects the pod; `aligned` sends it elsewhere."""
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted")
    topo = synthetic(1, 2, 4, 2, devices_per_numa={GPU: 1})
    from scheduler_core.model.cpuset import CPUSet
    from scheduler_core.model.node import Allocation

    busy_gpu0 = Allocation("default/other", "app", CPUSet(), devices={GPU: ("gpu0",)}, origin="imported")
    busy_numa1 = Allocation("default/cpus", "app", CPUSet.parse("4-7,12-15"), origin="imported")
    counts = {}
    for profile in PROFILES:
        nodes = [Node("a", topo, kubelet, [busy_gpu0, busy_numa1]), Node("b", topo, kubelet)]
        pod = Pod("t", (Container.guaranteed("app", 2000, GiB, devices={GPU: 1}),))
        job = Job("gpu", (Task("t", pod, 1, "restricted"),))
        result = run_session(Cluster(nodes), [job], profile=profile)
        counts[profile] = (result.pods[0].node, result.counts["topology_affinity_errors"])
    assert counts["volcano"] == ("a", 1)
    assert counts["aligned"] == ("b", 0)
    assert counts["unaware"] == ("a", 1)
    assert counts["kai"] == ("b", 0)  # restricted: cpu and gpu both want one zone, none of a's has both free


POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


@st.composite
def clusters_and_jobs(draw):
    shapes = [(1, 2, 2, 2), (2, 1, 3, 2), (1, 2, 4, 1), (2, 2, 2, 2)]
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        shape = draw(st.sampled_from(shapes))
        gpus = draw(st.integers(0, 1))
        topo = synthetic(*shape, memory_per_numa=8 * GiB, devices_per_numa={GPU: gpus} if gpus else None)
        kubelet = KubeletConfig(cpu_manager_policy="static",
                                topology_manager_policy=draw(st.sampled_from(POLICIES)),
                                topology_manager_scope=draw(st.sampled_from(("container", "pod"))))
        nodes.append(Node(f"n{i}", topo, kubelet))
    jobs = []
    for j in range(draw(st.integers(1, 8))):
        containers = []
        for c in range(draw(st.integers(1, 2))):
            cpus = draw(st.integers(1, 6))
            gpu = draw(st.integers(0, 1))
            guaranteed = draw(st.booleans())
            if guaranteed:
                containers.append(Container.guaranteed(f"c{c}", cpus * 1000, GiB, devices={GPU: gpu} if gpu else None))
            else:
                containers.append(Container(f"c{c}", {"cpu": cpus * 500}, {"cpu": cpus * 1000}))
        init = ()
        if draw(st.booleans()):
            init = (Container.guaranteed("init", draw(st.integers(1, 4)) * 1000, GiB, kind="init"),)
        pod = Pod("t", tuple(containers), init)
        replicas = draw(st.integers(1, 3))
        jobs.append(Job(f"j{j}", (Task("t", pod, replicas, draw(st.sampled_from((None, *POLICIES[1:])))),),
                        min_available=draw(st.integers(0, replicas)), submitted=j))
    return nodes, jobs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters_and_jobs())
def test_aligned_profile_never_gets_a_topology_affinity_error(case):
    nodes, jobs = case
    cluster = Cluster(nodes)
    result = run_session(cluster, jobs, profile="aligned")
    assert result.counts["topology_affinity_errors"] == 0
    assert result.counts["admission_errors"] == 0
    for p in result.pods:
        if p.status in ("admitted", "rejected"):
            assert p.status == "admitted", p.message
    # whatever stayed placed holds exactly the admitted allocations
    placed = {p.uid for p in result.pods if p.status == "admitted"}
    held = {a.pod for n in cluster for a in n.allocations}
    assert held <= placed


def test_profiles_are_objects_from_one_registry():
    from scheduler_core.errors import PolicyError
    from scheduler_core.scheduler.profiles import AlignedProfile, VolcanoProfile, get_profile

    assert list(PROFILES) == ["volcano", "aligned", "unaware", "nrt", "kai", "koordinator"]
    assert get_profile("volcano", 7) == VolcanoProfile(weight=7)
    assert isinstance(get_profile("aligned"), AlignedProfile)
    try:
        get_profile("fastest")
    except PolicyError as exc:
        assert "expected one of: volcano, aligned, unaware, nrt, kai, koordinator" in str(exc)
    else:
        raise AssertionError("an unknown profile name must be refused")
    # a Profile object carries its own options: the same session as the name plus weight
    nodes, jobs = fragmenting_workload()
    by_name = run_session(Cluster(nodes), jobs, profile="volcano", weight=10).to_dict()
    nodes, jobs = fragmenting_workload()
    by_object = run_session(Cluster(nodes), jobs, profile=VolcanoProfile(weight=10)).to_dict()
    by_name.pop("timings"), by_object.pop("timings")
    assert by_object == by_name
    assert by_object["weight"] == 10
    # and the plugin scores with it: one node fits the 4 CPUs on one NUMA node, the other needs two
    from scheduler_core.model.cpuset import CPUSet
    from scheduler_core.model.node import Allocation

    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="best-effort")
    busy = Allocation("default/busy", "app", CPUSet.parse("3,7"), origin="imported")
    cluster = Cluster([Node("a", upstream_8cpu(), kubelet), Node("b", upstream_8cpu(), kubelet, [busy])])
    pod = Pod("t", (Container.guaranteed("app", 4000, GiB),))
    result = run_session(cluster, [Job("j", (Task("t", pod, 1, "best-effort"),))], profile=VolcanoProfile(weight=10))
    assert {g["nodes"][0]: g["score"] for g in result.to_dict()["pods"][0]["groups"]} == {"a": 500, "b": 0}
