"""The koordinator profile reads a node's own labels, as upstream's NodeNUMAResource does:
`node.koordinator.sh/numa-topology-policy` overrides the policy koordlet reports of the kubelet's
(getNUMATopologyPolicy) and `node.koordinator.sh/cpu-bind-policy` sets the node's CPU bind policy
(GetNodeCPUBindPolicy). Nodes of one shape whose labels differ never share a node class, and the labels
survive every copy a comparison, headroom or make room takes of a node."""

from __future__ import annotations

import pytest

from scheduler_core.errors import TopologyError
from scheduler_core.koordinator.plugin import (
    NOT_MATCH_NUMA_TOPOLOGY,
    SMT_ALIGNMENT,
    UNKNOWN_NUMA_POLICY,
    NodeNUMAResource,
    cpu_topology,
    node_options,
    pod_requests,
    pre_filter,
)
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import KOORD_CPU_BIND_POLICY, KOORD_NUMA_TOPOLOGY_POLICY, Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.compare import Shape, Variant, headroom
from scheduler_core.scheduler.plugin_profiles import KoordinatorProfile
from scheduler_core.scheduler.session import run_session

GiB = 2**30
SINGLE = {KOORD_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"}
FULL_ONLY = {KOORD_CPU_BIND_POLICY: "FullPCPUsOnly"}


def node(name: str, labels: dict[str, str] | None = None, policy: str = "none") -> Node:
    """2 NUMA nodes × 2 cores × 2 threads, CPU Manager static, the kubelet's Topology Manager `policy`."""
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy)
    return Node(name, synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB), kubelet, labels=labels)


def pod(cpu_milli: int, name: str = "p") -> Pod:
    return Pod(name, (Container.guaranteed("app", cpu_milli, GiB),))


def job(cpu_milli: int, replicas: int = 1) -> Job:
    return Job("j", (Task("t", pod(cpu_milli), replicas),), min_available=1)


def reasons(result, index: int = 0) -> dict[str, str | None]:
    """Pod `index`'s verdict per node (every node of each verdict group): its reason."""
    out = result.to_dict()
    return {name: out["verdicts"][str(g["verdict"])]["reason"]
            for g in out["pods"][index]["groups"] for name in g["nodes"]}


def test_the_numa_topology_policy_label_overrides_the_kubelets():
    # getNUMATopologyPolicy: the label when set, else what koordlet reports (none for a `none` kubelet)
    for labels, want in ((None, ""), (SINGLE, "SingleNUMANode"), ({KOORD_NUMA_TOPOLOGY_POLICY: "Restricted"},
                                                                   "Restricted"),
                         ({KOORD_NUMA_TOPOLOGY_POLICY: ""}, "")):
        n = node("a", labels)
        assert node_options(n, cpu_topology(n)).numa_policy == want, labels
    # it wins over a policy the kubelet does publish (single-numa-node, pod scope)
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node",
                            topology_manager_scope="pod")
    n = Node("a", synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB), kubelet,
             labels={KOORD_NUMA_TOPOLOGY_POLICY: "BestEffort"})
    assert node_options(n, cpu_topology(n)).numa_policy == "BestEffort"


def test_a_single_numa_node_label_filters_what_its_unlabelled_twin_takes():
    """A 6-CPU pod spans both NUMA nodes: the labelled node's topology manager refuses it, its twin
    (same shape and kubelet, no label) takes it; one class would have given both the same verdict."""
    result = run_session(Cluster([node("a", SINGLE), node("b")]), [job(6000)], profile="koordinator")
    assert [p.node for p in result.pods] == ["b"] and result.counts["admitted"] == 1
    got = reasons(result)
    assert got["b"] is None
    assert got["a"] == "Unaligned NUMA Hint cause cpu prefer [11] among [11],memory prefer [11] among [11]"
    # while the labelled node still takes pods that fit one of its 4-CPU NUMA nodes (two; a third has no room)
    result = run_session(Cluster([node("a", SINGLE)]), [job(3000, 3)], profile="koordinator")
    assert [p.node for p in result.pods] == ["a", "a", None]


def test_a_pods_numa_policy_must_match_the_labelled_nodes():
    spec = {"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy": "Restricted"}'}
    p = NodeNUMAResource({n.name: node_options(n, cpu_topology(n)) for n in (node("a", SINGLE), node("b"))})
    state = pre_filter(pod_requests(pod(2000)), spec)
    got = p.filter(state, "a", "u")
    assert (got.code, got.reason) == ("UnschedulableAndUnresolvable", NOT_MATCH_NUMA_TOPOLOGY)
    assert p.filter(state, "b", "u").ok  # the unlabelled node takes the pod's own policy


def test_an_unknown_numa_topology_policy_refuses_the_node_instead_of_failing():
    """Upstream takes the label unchecked and its topology manager has no policy for it (its scheduler
    fails on the nil policy); the model refuses the node, naming the value. A pod that skips the plugin
    (no requests) still passes, as upstream's Filter returns before reading the policy."""
    n = node("a", {KOORD_NUMA_TOPOLOGY_POLICY: "single-numa-node"})  # the kubelet's spelling, not Koordinator's
    p = NodeNUMAResource({"a": node_options(n, cpu_topology(n))})
    got = p.filter(pre_filter(pod_requests(pod(2000)), {}), "a", "u")
    assert (got.code, got.reason) == ("UnschedulableAndUnresolvable", UNKNOWN_NUMA_POLICY.format("single-numa-node"))
    assert p.filter(pre_filter({}, {}), "a", "u").ok


def test_a_full_pcpus_only_label_refuses_an_odd_cpu_count():
    """GetNodeCPUBindPolicy: the label makes the node FullPCPUsOnly though its kubelet has no
    full-pcpus-only: an integral request is bound to whole cores, 3 CPUs on 2-thread cores refused."""
    result = run_session(Cluster([node("a", FULL_ONLY), node("b")]), [job(3000)], profile="koordinator")
    assert [p.node for p in result.pods] == ["b"]
    got = reasons(result)
    assert got["a"] == SMT_ALIGNMENT and got["b"] is None
    p = NodeNUMAResource({"a": node_options(node("a", FULL_ONLY), cpu_topology(node("a")))})
    assert p.nodes["a"].cpu_bind_policy == "FullPCPUsOnly"
    state = pre_filter(pod_requests(pod(2000)), {})
    assert p.reserve(state, "a", "u").ok
    topo = p.nodes["a"].cpu_topology
    assert topo is not None
    cpus = p.allocs["a"].pods["u"].cpus
    assert len(cpus) == 2 and len({topo.details[c].core for c in cpus}) == 1  # both threads of one core


def test_a_spread_by_pcpus_label_takes_one_thread_per_core():
    n = node("a", {KOORD_CPU_BIND_POLICY: "SpreadByPCPUs"})
    p = NodeNUMAResource({"a": node_options(n, cpu_topology(n))})
    assert p.nodes["a"].cpu_bind_policy == "SpreadByPCPUs"
    assert p.reserve(pre_filter(pod_requests(pod(2000)), {}), "a", "u").ok
    topo = p.nodes["a"].cpu_topology
    assert topo is not None
    cpus = p.allocs["a"].pods["u"].cpus
    assert len(cpus) == 2 and len({topo.details[c].core for c in cpus}) == 2


def test_nodes_that_differ_only_in_other_labels_share_their_class_and_state():
    """A hostname label is unique per node: it must not split nodes into classes (speed), nor their
    state keys (headroom and make room answer once per state)."""
    cluster = Cluster([node(f"n{i}", {"kubernetes.io/hostname": f"n{i}"}) for i in range(3)] + [node("s", SINGLE)])
    session = KoordinatorProfile().open(cluster)
    keys = {name: (cluster.static_id(name), session.state_key(name)) for name in cluster.nodes}
    assert keys["n0"] == keys["n1"] == keys["n2"] != keys["s"]
    assert cluster.static_id("s") == cluster.static_id("n0")  # the labels stay out of the node shape
    states = {name: n.state_key() for name, n in cluster.nodes.items()}
    assert states["n0"] == states["n1"] != states["s"]


def test_labels_survive_the_copies_comparisons_and_headroom_take():
    cluster = Cluster([node("a", {**SINGLE, "zone": "z1"}), node("b")])
    for copy in (cluster.copy(), cluster.copy(["a"]), Cluster([cluster.nodes["a"].copy()])):
        assert dict(copy.nodes["a"].labels) == {**SINGLE, "zone": "z1"}
    saved = cluster.snapshot("a")
    cluster.restore("a", saved)
    assert saved[0].labels == cluster.nodes["a"].labels
    again = Node.from_dict(cluster.nodes["a"].to_dict())
    assert dict(again.labels) == {**SINGLE, "zone": "z1"} and "labels" not in cluster.nodes["b"].to_dict()
    # a comparison's variant that overrides the kubelet rebuilds the nodes: the labels stay
    for variant in (Variant("koordinator"), Variant("koordinator", topology_manager_policy="best-effort")):
        rebuilt = {n.name: n for n in variant.apply(cluster.nodes.values())}
        assert dict(rebuilt["a"].labels) == {**SINGLE, "zone": "z1"} and not rebuilt["b"].labels
    # headroom answers per node state: the labelled node takes no 6-CPU pod, its twin one
    room = headroom(cluster, Shape.parse("6", "1Gi"), "koordinator")
    assert {n["node"]: n["count"] for n in room["nodes"]} == {"a": 0, "b": 1}


@pytest.mark.parametrize(("labels", "words"), [
    (["zone"], "must map label names to values"),
    ({"zone": 1}, "the value of 'zone' must be a string"),
    ({1: "x"}, "a label name must be a non-empty string"),
    ({"": "x"}, "a label name must be a non-empty string"),
])
def test_labels_must_be_strings(labels, words):
    with pytest.raises(TopologyError, match=words) as err:
        Node("a", synthetic(1, 1, 1, 1), labels=labels)
    assert err.value.field == "labels"
    with pytest.raises(TopologyError, match=words):
        Node.from_dict({**node("a").to_dict(), "labels": labels})
