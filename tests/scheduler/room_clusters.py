"""Clusters built for make-room tests (engine objects; the web tests turn them into rows).

`fragmented(nodes)`: the shape of fragmentation make-room exists for. Every node is one socket of two
NUMA nodes, 8 cores × 2 threads each (16 CPUs per NUMA node, 32 per node), static CPU Manager,
`single-numa-node` Topology Manager, nothing reserved; every NUMA node holds one small pod of 2 CPUs
(one core, both threads) in the middle of it (core 3 of NUMA 0, core 11 of NUMA 1), in namespace
`batch`. So 28 of every node's 32 CPUs are free, yet no NUMA node has the 16 free CPUs a 16-CPU
`single-numa-node` pod needs: such a pod fits nowhere. Taking one small pod off a NUMA node frees
all 16 of it; the pod then goes back on the other NUMA node of the same node (12 CPUs still free
there once the big pod is in). A gang of k such pods therefore needs exactly k moves of 2 CPUs.
"""

from __future__ import annotations

from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic

GiB = 2**30
SNN = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node")
FRAGMENTED_TOPOLOGY = synthetic(1, 2, 8, 2, memory_per_numa=64 * GiB)
#: (NUMA node, CPUs) of the small pod on each NUMA node: core c is CPUs c and c + 16
SMALL_PODS = ((0, "3,19"), (1, "11,27"))


def fragmented_node(i: int) -> Node:
    allocations = [Allocation(f"batch/small-{i}-{numa}", "app", CPUSet.parse(cpus)) for numa, cpus in SMALL_PODS]
    return Node(f"node-{i:02d}", FRAGMENTED_TOPOLOGY, SNN, allocations)


def fragmented(nodes: int) -> list[Node]:
    return [fragmented_node(i) for i in range(nodes)]


def gang(pods: int, cpus: int = 16, policy: str = "single-numa-node", name: str = "train") -> Job:
    """A gang of `pods` Guaranteed pods of `cpus` CPUs and 1 GiB each."""
    pod = Pod("worker", (Container.guaranteed("app", cpus * 1000, GiB),))
    return Job(name, (Task("worker", pod, pods, policy),), namespace="ml")
