"""The koordinator profile on engine nodes: what NodeNUMAResource reads from a node, its NUMA
admission with reservations seen by the next pod, its CPU bind policy checks, and release on rollback."""

from __future__ import annotations

import pytest

from scheduler_core.errors import PolicyError
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
from scheduler_core.scheduler.admissions import kubelet_reading
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.plugin_profiles import KoordinatorProfile
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


# -- the pod's Koordinator labels, annotations and priority in a session ---------------------------------
LSR = {"koordinator.sh/qosClass": "LSR"}
REQUIRE_FULL = {"scheduling.koordinator.sh/resource-spec": '{"requiredCPUBindPolicy": "FullPCPUs"}'}
SINGLE_NUMA_SPEC = {"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy": "SingleNUMANode"}'}


def reasons_of(result, index: int) -> dict[str, str | None]:
    """Pod `index`'s verdict per node (the first node of each verdict group): its reason."""
    out = result.to_dict()
    return {g["nodes"][0]: out["verdicts"][str(g["verdict"])]["reason"] for g in out["pods"][index]["groups"]}


def test_an_lsr_pod_of_koord_prod_is_bound_to_full_cores_and_a_plain_pod_is_not():
    """PreFilter reads the engine pod's labels and priority (9500: koord-prod): the LSR pod's CPUs are
    taken as whole physical cores under the profile's default bind policy; the same containers without
    the label are not bound (the plugin takes no CPUs for them)."""
    cluster = Cluster([node("a", "none")])
    session = KoordinatorProfile().open(cluster)
    lsr = Pod("lsr", (Container.guaranteed("app", 2000, GiB),), labels=LSR, priority=9500)
    plain = Pod("plain", lsr.containers)
    lsr_state, plain_state = session.prepare(lsr), session.prepare(plain)
    assert (lsr_state.cpu_bind, lsr_state.preferred_bind) == (True, "FullPCPUs")
    assert not plain_state.cpu_bind
    for pod_, state in ((lsr, lsr_state), (plain, plain_state)):
        verdict = session.evaluate("a", pod_, state)
        assert verdict.outcome == "passed"
        session.on_place(pod_, state, "a", verdict)
    topo = session.plugin.nodes["a"].cpu_topology
    cpus = session.plugin.allocs["a"].pods[lsr.uid].cpus
    assert len(cpus) == 2 and len({topo.details[c].core for c in cpus}) == 1  # both threads of one core
    assert plain.uid not in session.plugin.allocs["a"].pods
    # the profile's DefaultCPUBindPolicy is the one PreFilter uses: SpreadByPCPUs, one thread per core
    spread = KoordinatorProfile(default_cpu_bind_policy="SpreadByPCPUs").open(Cluster([node("a", "none")]))
    state = spread.prepare(lsr)
    assert state.preferred_bind == "SpreadByPCPUs"
    spread.on_place(lsr, state, "a", spread.evaluate("a", lsr, state))
    cpus = spread.plugin.allocs["a"].pods[lsr.uid].cpus
    assert len(cpus) == 2 and len({topo.details[c].core for c in cpus}) == 2
    # an LSR pod of a batch priority (5500: koord-batch) is not bound
    assert not session.prepare(Pod("p", lsr.containers, labels=LSR, priority=5500)).cpu_bind


def test_a_required_full_pcpus_pod_avoids_half_cores_in_a_session():
    """NUMA 0 of the node has two free CPUs, one thread of each of its cores (CPUs 0 and 1 reserved). With
    MostAllocated NUMA scoring a plain 2-CPU pod packs onto NUMA 0; an LSR koord-prod pod requiring
    FullPCPUs cannot have a whole core there and is admitted on NUMA 1."""
    lsr = Pod("lsr", (Container.guaranteed("app", 2000, GiB),), labels=LSR, annotations=REQUIRE_FULL,
              priority=9000)
    profile = KoordinatorProfile(numa_scoring_strategy="MostAllocated")
    for pod_, numa in ((Pod("plain", lsr.containers), 0b01), (lsr, 0b10)):
        nodes = [Node("a", synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB),
                      KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node",
                                    topology_manager_scope="pod", reserved_cpus="0,1"))]
        result = run_session(Cluster(nodes), [Job("j", (Task("t", pod_),))], profile=profile)
        (record,) = result.pods
        assert record.status == "admitted" and record.predicted is not None
        assert record.predicted.numa_mask == numa


def test_pods_that_differ_only_in_koordinator_metadata_do_not_share_verdicts():
    """A plain 3-CPU pod fits both nodes and goes to one; an LSR koord-prod pod of the same containers
    requiring FullPCPUs is refused everywhere (3 CPUs are not whole cores of 2 threads). Had it shared
    the plain pod's verdicts, the untouched node's would have let it in."""
    nodes = [node("a", "none"), node("b", "none")]
    plain = Pod("plain", (Container.guaranteed("app", 3000, GiB),))
    lsr = Pod("lsr", plain.containers, labels={**LSR, "koordinator.sh/priority-class": "koord-prod"},
              annotations=REQUIRE_FULL)
    jobs = [Job("plain", (Task("t", plain),)), Job("lsr", (Task("t", lsr),), submitted=1)]
    result = run_session(Cluster(nodes), jobs, profile="koordinator")
    assert [(p.pod, p.status) for p in result.pods] == [("plain-t-0", "admitted"), ("lsr-t-0", "unschedulable")]
    assert set(reasons_of(result, 1).values()) == {SMT_ALIGNMENT}
    assert result.to_dict()["pods"][1]["outcomes"]["unschedulable"] == 2  # both nodes
    # the kubelet reads neither: its remembered admissions serve both pods
    assert kubelet_reading(lsr) == kubelet_reading(plain)


def test_a_numa_topology_spec_filters_a_node_whose_numa_nodes_are_too_small():
    """A 6-CPU pod annotated SingleNUMANode: node a (NUMA nodes of 4 CPUs, no kubelet policy) is
    filtered, node b (NUMA nodes of 8 CPUs) takes it on one NUMA node; without the annotation the pod
    fits a across both NUMA nodes."""
    big = Node("b", synthetic(1, 2, 4, 2, memory_per_numa=8 * GiB), KubeletConfig(cpu_manager_policy="static"))
    spec = Pod("spec", (Container.guaranteed("app", 6000, GiB),), annotations=SINGLE_NUMA_SPEC)
    plain = Pod("plain", spec.containers)
    session = KoordinatorProfile().open(Cluster([node("a", "none"), big]))
    state = session.prepare(spec)
    assert state.numa_policy == "SingleNUMANode"
    verdict = session.evaluate("a", spec, state)
    assert verdict.outcome == "filtered" and verdict.reason and "Unaligned NUMA" in verdict.reason
    passed = session.evaluate("b", spec, state)
    assert (passed.outcome, passed.numa_mask.bit_count()) == ("passed", 1)
    assert session.evaluate("a", plain, session.prepare(plain)).outcome == "passed"
    result = run_session(Cluster([node("a", "none"), big]), [Job("j", (Task("t", spec),))], profile="koordinator")
    assert [(p.node, p.status) for p in result.pods] == [("b", "admitted")]


def test_a_malformed_resource_spec_fails_the_pod_with_the_parse_error():
    """Upstream's PreFilter fails a pod whose resource-spec annotation is not JSON: every node refuses it."""
    bad = Pod("bad", (Container.guaranteed("app", 2000, GiB),), labels=LSR, priority=9000,
              annotations={"scheduling.koordinator.sh/resource-spec": "{FullPCPUs"})
    result = run_session(Cluster([node("a"), node("b")]), [Job("j", (Task("t", bad),))], profile="koordinator")
    assert result.pods[0].status == "unschedulable"
    (reason,) = set(reasons_of(result, 0).values())
    assert reason.startswith("invalid scheduling.koordinator.sh/resource-spec annotation:")


def test_the_profile_refuses_settings_upstream_args_refuse():
    """NodeNUMAResourceArgs: DefaultCPUBindPolicy FullPCPUs or SpreadByPCPUs (not a node's FullPCPUsOnly), the
    scoring strategies LeastAllocated or MostAllocated."""
    for bad in ({"default_cpu_bind_policy": "FullPCPUsOnly"}, {"scoring_strategy": "LeastNUMANodes"},
                {"numa_scoring_strategy": "Balanced"}):
        with pytest.raises(PolicyError, match=repr(next(iter(bad.values())))):
            KoordinatorProfile(**bad)
    assert KoordinatorProfile(default_cpu_bind_policy="SpreadByPCPUs").default_cpu_bind_policy == "SpreadByPCPUs"
