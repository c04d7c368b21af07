"""Stranded capacity: free CPUs and devices on NUMA nodes where a shape cannot fit aligned."""

from __future__ import annotations

import pytest

from scheduler_core import KubeletConfig, Node
from scheduler_core.errors import RequestError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.node import Allocation
from scheduler_core.model.topology import CPU, Device, NUMANode, Topology, synthetic
from scheduler_core.scheduler.headroom import Shape
from scheduler_core.scheduler.stranded import node_free, stranded

STATIC = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node")
GIB = 1 << 30


def two_numa(kubelet: KubeletConfig = STATIC, gpus_on: tuple[int, ...] = ()) -> Node:
    """2 NUMA nodes x 4 cores x 2 threads: CPUs 0-7 on NUMA 0, 8-15 on NUMA 1 (cores are thread pairs)."""
    cpus = [CPU(i, i // 2, 0, i // 8) for i in range(16)]
    devices = [Device(f"gpu{i}", "nvidia.com/gpu", (n,)) for i, n in enumerate(gpus_on)]
    numa = [NUMANode(0, 16 * GIB), NUMANode(1, 16 * GIB)]
    return Node("n", Topology(cpus, numa, devices=devices), kubelet)


def hold(node: Node, pod: str, cpus: str, **extra: object) -> None:
    node.allocate(Allocation(pod, "c", CPUSet.parse(cpus), **extra))  # type: ignore[arg-type]


def test_a_fragmented_node_strands_its_free_cpus_for_a_shape_no_numa_node_takes():
    node = two_numa()
    hold(node, "a", "0-4")  # NUMA 0: 3 free (5, 6, 7)
    hold(node, "b", "8-12")  # NUMA 1: 3 free (13, 14, 15)
    free = node_free(node)
    assert [(n.cpus, n.core_cpus) for n in free.numa] == [(3, 2), (3, 2)]  # 5 is half a core
    four = stranded([free], Shape(4000))
    assert four == {"cpus": 6, "devices": {}, "aligned_pods": 0}  # 6 free by count, none usable by a 4-CPU pod
    three = stranded([free], Shape(3000))
    assert three == {"cpus": 0, "devices": {}, "aligned_pods": 2}
    two = stranded([free], Shape(2000))
    assert two["aligned_pods"] == 2 and two["cpus"] == 0


def test_full_pcpus_only_counts_whole_free_cores_and_refuses_odd_counts():
    node = two_numa(KubeletConfig(cpu_manager_policy="static", cpu_manager_options={"full-pcpus-only": "true"}))
    hold(node, "a", "0-4")  # NUMA 0 free: 5 (half of core 2), 6-7 (core 3)
    free = node_free(node)
    assert stranded([free], Shape(3000))["aligned_pods"] == 0  # odd: SMTAlignmentError on this machine
    assert stranded([free], Shape(3000))["cpus"] == 3 + 8
    # NUMA 0 has 3 free CPUs but one whole core: a 2-CPU pod fits once there, four times on NUMA 1
    assert stranded([free], Shape(2000)) == {"cpus": 0, "devices": {}, "aligned_pods": 1 + 4}
    assert stranded([free], Shape(4000)) == {"cpus": 3, "devices": {}, "aligned_pods": 2}


def test_devices_strand_where_their_numa_node_lacks_the_cpus():
    node = two_numa(gpus_on=(0, 0, 1))
    hold(node, "a", "0-5")  # NUMA 0: 2 free CPUs, 2 GPUs
    free = node_free(node)
    shape = Shape(4000, devices=(("nvidia.com/gpu", 1),))
    # NUMA 0 cannot take a 4-CPU GPU pod: its 2 CPUs and 2 GPUs are stranded; NUMA 1 takes one (one GPU)
    assert stranded([free], shape) == {"cpus": 2, "devices": {"nvidia.com/gpu": 2}, "aligned_pods": 1}
    # a GPU taken on NUMA 1 leaves its 8 CPUs stranded for this shape too
    node.allocate(Allocation("g", "c", devices={"nvidia.com/gpu": ("gpu2",)}))
    assert stranded([node_free(node)], shape) == {"cpus": 10, "devices": {"nvidia.com/gpu": 2}, "aligned_pods": 0}


def test_memory_counts_only_where_the_memory_manager_pins_it():
    static_memory = KubeletConfig(cpu_manager_policy="static", memory_manager_policy="Static",
                                  reserved_memory={0: {"memory": GIB}, 1: {"memory": GIB}})
    node = two_numa(static_memory)
    node.allocate(Allocation("m", "c", memory={0: {"memory": 10 * GIB}}))
    shape = Shape(2000, memory=8 * GIB)
    assert stranded([node_free(node)], shape) == {"cpus": 8, "devices": {}, "aligned_pods": 1}  # 5 GiB left on 0
    assert stranded([node_free(two_numa())], shape)["aligned_pods"] == 8  # memory not pinned: CPUs decide


def test_nodes_without_cpu_pinning_count_for_nothing_and_weights_multiply():
    shared = node_free(Node("s", synthetic(1, 2, 4, 2), KubeletConfig()))
    assert stranded([shared], Shape(4000)) == {"cpus": 0, "devices": {}, "aligned_pods": 0}
    free = node_free(Node("p", synthetic(1, 2, 4, 2), STATIC))
    assert stranded({free: 1000}, Shape(16000)) == {"cpus": 16000, "devices": {}, "aligned_pods": 0}
    assert stranded({free: 1000}, Shape(8000))["aligned_pods"] == 2000


def test_equal_nodes_share_one_summary():
    assert node_free(two_numa()) == node_free(two_numa())
    assert len({node_free(two_numa()), node_free(two_numa(gpus_on=(1,)))}) == 2


def test_a_fractional_cpu_shape_is_refused_with_the_field():
    with pytest.raises(RequestError, match="cpu:"):
        stranded([node_free(two_numa())], Shape(1500))


def test_a_device_without_numa_affinity_serves_any_numa_node_once_and_is_never_stranded():
    node = two_numa()
    node = Node("n", Topology(node.topology.cpus, node.topology.numa_nodes,
                              devices=[Device("nic0", "example.com/nic", None)]), STATIC)
    free = node_free(node)
    assert free.devices == (("example.com/nic", 1),) and free.floating == (("example.com/nic", 1),)
    shape = Shape(2000, devices=(("example.com/nic", 1),))
    # both NUMA nodes could take the pod with the NIC, but there is one NIC: one pod
    assert stranded([free], shape) == {"cpus": 0, "devices": {"example.com/nic": 0}, "aligned_pods": 1}
