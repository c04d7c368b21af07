"""The kubelet's admission of a pod on a node: scopes, policies, providers, and the resource at fault."""

import pytest

from scheduler_core import CPU, Container, CPUSet, Device, KubeletConfig, Node, NUMANode, Pod, Topology, admit_pod
from scheduler_core.kubelet.admission import TopologyAffinityError
from scheduler_core.kubelet.topologymanager.hint import format_hint

GiB = 1 << 30
MiB = 1 << 20
GPU, NIC = "gpu-vendor.com/gpu", "nic-vendor.com/nic"


def blog_machine() -> Topology:
    """Seed 003's figure 1: 2 NUMA nodes, CPUs 0-3 and 4-7, GPU0/NIC0 on NUMA 0, GPU1/NIC1 on NUMA 1."""
    cpus = [CPU(i, i, i // 4, i // 4, i // 4) for i in range(8)]
    nodes = [NUMANode(0, 8 * GiB), NUMANode(1, 8 * GiB)]
    devices = [Device(f"{kind}{n}", res, (n,)) for kind, res in (("gpu", GPU), ("nic", NIC)) for n in (0, 1)]
    return Topology(cpus, nodes, {0: [10, 20], 1: [20, 10]}, devices)


def kubelet(policy="single-numa-node", scope="container", **extra) -> KubeletConfig:
    return KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy,
                         topology_manager_scope=scope, **extra)


def aligned_container(name, cpus=2) -> Container:
    return Container.guaranteed(name, cpus * 1000, 200 * MiB, devices={GPU: 1, NIC: 1})


def texts(hints):
    return [format_hint(h, 2) for h in hints]


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_seed003_container0_and_container1(policy):
    node = Node("n", blog_machine(), kubelet(policy))
    pod = Pod("p", (aligned_container("container0"), aligned_container("container1")))
    result = admit_pod(node, pod)
    assert result.admitted and result.error is None
    by_name = {a.container: a for a in result.allocations}
    assert str(by_name["container0"].cpus) == "0-1"
    assert by_name["container0"].devices == {GPU: ("gpu0",), NIC: ("nic0",)}
    assert str(by_name["container1"].cpus) == "4-5"
    assert by_name["container1"].devices == {GPU: ("gpu1",), NIC: ("nic1",)}
    first, second = result.decisions
    assert texts(first.hints["cpu"]) == ["{01: T}", "{10: T}", "{11: F}"]
    assert [t for t in texts(first.hints[GPU]) if t.endswith("T}")] == ["{01: T}", "{10: T}"]
    assert format_hint(first.merge.hint, 2) == "{01: T}"
    # container1: NUMA 0's GPU and NIC are taken, CPUs still fit on either node
    assert texts(second.hints["cpu"]) == ["{01: T}", "{10: T}", "{11: F}"]
    assert [t for t in texts(second.hints[GPU]) if t.endswith("T}")] == ["{10: T}"]
    assert format_hint(second.merge.hint, 2) == "{10: T}"
    # committed: the node now holds both containers
    assert str(CPUSet(node.free_cpus)) == "2-3,6-7"
    assert node.free_devices(GPU) == []


def seed000_node(policy, busy="0-1") -> Node:
    cpus = [CPU(i, i, i // 4, i // 4, i // 4) for i in range(8)]
    node = Node("node-x", Topology(cpus), kubelet(policy))
    from scheduler_core import Allocation

    node.allocate(Allocation("other", "c", CPUSet.parse(busy)))
    return node


def test_seed000_s11_best_effort_takes_4_5_6():
    node = seed000_node("best-effort")
    result = admit_pod(node, Pod("task", (Container.guaranteed("c", 3000, GiB),)))
    assert result.admitted
    assert texts(result.decisions[0].hints["cpu"]) == ["{10: T}", "{11: F}"]
    assert str(result.cpus) == "4-6"


def test_seed000_s11_single_numa_node_rejects_when_numa1_has_two_free():
    node = seed000_node("single-numa-node", busy="0-1,4-5")
    before = node.state_key()
    result = admit_pod(node, Pod("task", (Container.guaranteed("c", 3000, GiB),)))
    assert not result.admitted
    assert isinstance(result.error, TopologyAffinityError)
    assert result.reason == "TopologyAffinityError"
    assert result.error.message == "Resources cannot be allocated with Topology locality"
    assert (result.error.container, result.error.resource) == ("c", "cpu")
    assert node.state_key() == before  # a rejected pod leaves nothing behind


def test_pod_scope_rejects_what_container_scope_admits():
    pod = Pod("p", (Container.guaranteed("a", 3000, GiB), Container.guaranteed("b", 3000, GiB)))
    cpus = [CPU(i, i, i // 4, i // 4, i // 4) for i in range(8)]
    by_container = admit_pod(Node("n", Topology(cpus), kubelet()), pod)
    assert by_container.admitted
    assert {str(a.cpus) for a in by_container.allocations} == {"0-2", "4-6"}
    by_pod = admit_pod(Node("n", Topology(cpus), kubelet(scope="pod")), pod)
    assert not by_pod.admitted
    assert (by_pod.error.container, by_pod.error.resource) == (None, "cpu")
    assert len(by_pod.decisions) == 1


def test_conflicting_resources_are_named_together():
    node = Node("n", blog_machine(), kubelet("restricted"))
    from scheduler_core import Allocation

    node.allocate(Allocation("other", "c", CPUSet.parse("4-7"), devices={GPU: ("gpu0",)}))
    result = admit_pod(node, Pod("p", (Container.guaranteed("c", 2000, GiB, devices={GPU: 1}),)))
    assert not result.admitted
    assert result.error.resource == f"{GPU} + cpu"
    # non-preferred merges {10}, {01}, {11}: one NUMA node is the best non-preferred count, lower id wins
    assert format_hint(result.hint, 2) == "{01: F}"


def test_smt_alignment_error():
    from scheduler_core.model.topology import synthetic

    node = Node("n", synthetic(1, 1, 4, 2), kubelet("best-effort", cpu_manager_options={"full-pcpus-only": "true"}))
    result = admit_pod(node, Pod("p", (Container.guaranteed("c", 3000, GiB),)))
    assert not result.admitted
    assert result.reason == "SMTAlignmentError"
    assert "not multiple cpus per core = 2" in result.error.message


def test_policy_none_allocates_without_hints():
    node = Node("n", blog_machine(), kubelet("none"))
    result = admit_pod(node, Pod("p", (Container.guaranteed("c", 6000, GiB),)))
    assert result.admitted and result.decisions == []
    assert len(result.cpus) == 6


def test_init_container_cpus_are_reused_and_released():
    node = Node("n", blog_machine(), kubelet("best-effort"))
    init = Container.guaranteed("setup", 4000, GiB, kind="init")
    pod = Pod("p", (Container.guaranteed("app", 2000, GiB),), (init,))
    result = admit_pod(node, pod)
    assert result.admitted
    assert [a.container for a in result.allocations] == ["app"]
    assert result.cpus <= CPUSet.parse("0-3")  # reused from the init container's NUMA node
    assert len(CPUSet(node.free_cpus)) == 6


def test_static_memory_manager_places_and_refuses_memory():
    k = kubelet("single-numa-node", memory_manager_policy="Static", reserved_memory={0: {"memory": GiB}})
    node = Node("n", blog_machine(), k)
    ok = admit_pod(node, Pod("a", (Container.guaranteed("c", 1000, 4 * GiB),)))
    assert ok.admitted
    assert ok.allocations[0].memory == {0: {"memory": 4 * GiB}}
    assert node.memory_free(0) == 3 * GiB
    too_big = admit_pod(node, Pod("b", (Container.guaranteed("c", 1000, 9 * GiB),)))
    assert not too_big.admitted and too_big.error.resource == "memory"


def test_dry_run_does_not_commit():
    node = Node("n", blog_machine(), kubelet())
    result = admit_pod(node, Pod("p", (aligned_container("c"),)), commit=False)
    assert result.admitted and not node.allocations
    assert result.to_dict()["cpus"] == "0-1"
