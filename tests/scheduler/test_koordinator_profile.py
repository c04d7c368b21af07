"""The koordinator profile on engine nodes: what NodeNUMAResource reads from a node, its NUMA
admission with reservations seen by the next pod, its CPU bind policy checks, and release on rollback."""

from __future__ import annotations

from scheduler_core.koordinator.plugin import (
    INVALID_REQUESTED_CPUS,
    SMT_ALIGNMENT,
    NodeNUMAResource,
    cpu_topology,
    node_options,
    pod_requests,
    pre_filter,
)
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.session import run_session

GiB = 2**30


def node(name: str, policy: str = "single-numa-node", scope: str = "pod", **cpu_options: bool) -> Node:
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy,
                            topology_manager_scope=scope, cpu_manager_options=cpu_options)
    return Node(name, synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB), kubelet)  # 2 NUMA nodes × 4 CPUs


def plugin(*nodes: Node) -> NodeNUMAResource:
    return NodeNUMAResource({n.name: node_options(n, cpu_topology(n)) for n in nodes})


def pod(cpu_milli: int, memory: int = GiB) -> Pod:
    return Pod("p", (Container.guaranteed("app", cpu_milli, memory),))


def test_what_koordlet_publishes_decides_the_policy():
    # only single-numa-node with pod scope reaches the plugin as a policy (SingleNUMANodePodLevel)
    n = node("a")
    assert node_options(n, cpu_topology(n)).numa_policy == "SingleNUMANode"
    for policy, scope in (("single-numa-node", "container"), ("restricted", "pod"), ("best-effort", "container")):
        n = node("a", policy, scope)
        assert node_options(n, cpu_topology(n)).numa_policy == ""
    opts = node_options(n, cpu_topology(n))
    assert opts.numa_resources == {0: {"cpu": 4000, "memory": 8 * GiB}, 1: {"cpu": 4000, "memory": 8 * GiB}}


def test_numa_admission_sees_the_previous_reservations():
    p = plugin(node("a"))
    state = pre_filter(pod_requests(pod(3000)), {})
    first = p.filter(state, "a", "u1")
    assert first.ok and first.hint == 0b01  # the narrowest, then the higher LeastAllocated score: NUMA 0
    assert p.reserve(state, "a", "u1", first.hint).ok
    second = p.filter(state, "a", "u2")
    assert second.ok and second.hint == 0b10  # NUMA 0 has 1 CPU left: NUMA 1
    assert p.reserve(state, "a", "u2", second.hint).ok
    third = p.filter(state, "a", "u3")
    assert (third.code, third.reason) == ("Unschedulable", "Unsatisfied NUMA cpu, Unsatisfied NUMA memory")
    p.unreserve("u2")  # a rolled-back gang gives NUMA 1 back
    assert p.filter(state, "a", "u3").hint == 0b10


def test_cpu_bind_policy_of_a_full_pcpus_only_node():
    p = plugin(node("a", "none", **{"full-pcpus-only": True}))
    assert p.nodes["a"].cpu_bind_policy == "FullPCPUsOnly"
    burstable = Pod("b", (Container("app", {"cpu": 1500}, {}),))
    got = p.filter(pre_filter(pod_requests(burstable), {}), "a")
    assert (got.code, got.reason) == ("UnschedulableAndUnresolvable", INVALID_REQUESTED_CPUS)
    got = p.filter(pre_filter(pod_requests(pod(3000)), {}), "a")
    assert (got.code, got.reason) == ("UnschedulableAndUnresolvable", SMT_ALIGNMENT)
    state = pre_filter(pod_requests(pod(2000)), {})
    assert p.reserve(state, "a", "u").ok
    topo = p.nodes["a"].cpu_topology
    cpus = p.allocs["a"].pods["u"].cpus
    assert len(cpus) == 2 and len({topo.details[c].core for c in cpus}) == 1  # one whole core


def test_lse_pod_binds_by_its_resource_spec():
    meta = {"koordinator.sh/qosClass": "LSE",
            "scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": "SpreadByPCPUs"}'}
    state = pre_filter({"cpu": 2000}, meta)
    assert state.cpu_bind and state.preferred_bind == "SpreadByPCPUs" and not state.required_bind
    p = plugin(node("a", "none"))
    assert p.reserve(state, "a", "u").ok
    topo = p.nodes["a"].cpu_topology
    cpus = p.allocs["a"].pods["u"].cpus
    assert len(cpus) == 2 and len({topo.details[c].core for c in cpus}) == 2  # one thread per core
    assert pre_filter({"cpu": 1500}, meta).error == INVALID_REQUESTED_CPUS


def test_session_places_by_the_plugin_and_the_kubelet_admits():
    nodes = [node("a"), node("b")]
    jobs = [Job(f"j{i}", (Task("t", pod(3000), 1),), min_available=1, submitted=i) for i in range(4)]
    result = run_session(Cluster(nodes), jobs, profile="koordinator")
    assert result.counts["admitted"] == 4 and result.counts["topology_affinity_errors"] == 0
    # LeastAllocated over the zones the pod takes: both nodes fill NUMA 0 first, then NUMA 1
    assert sorted(p.node for p in result.pods) == ["a", "a", "b", "b"]
