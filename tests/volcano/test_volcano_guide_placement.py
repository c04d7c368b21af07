"""Volcano's NUMA-aware user guide ("NUMA 调度分析"): node-1 single-numa-node 16+16 CPUs, node-2
best-effort 16+16, node-3 best-effort 20+20. A 2-CPU single-numa-node pod goes to node-1; a 20-CPU
best-effort task goes to node-3, which holds it on one NUMA node while node-2 needs two."""

from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.session import run_session

GiB = 2**30


def seed_cluster() -> Cluster:
    def kubelet(policy):
        return KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy)
    sixteen = synthetic(2, 1, 8, 2, memory_per_numa=64 * GiB)   # 16 CPUs per NUMA node
    twenty = synthetic(2, 1, 10, 2, memory_per_numa=64 * GiB)   # 20 CPUs per NUMA node
    return Cluster([Node("node-1", sixteen, kubelet("single-numa-node")),
                    Node("node-2", sixteen, kubelet("best-effort")),
                    Node("node-3", twenty, kubelet("best-effort"))])


def job(name: str, cpus: int, policy: str) -> Job:
    pod = Pod("template", (Container.guaranteed("container-1", cpus * 1000, 2 * GiB),))
    return Job(name, (Task("test", pod, 1, policy),), min_available=1)


def test_two_cpu_single_numa_node_pod_goes_to_node_1():
    result = run_session(seed_cluster(), [job("numa-test", 2, "single-numa-node")], profile="volcano")
    record = result.pods[0]
    assert record.node == "node-1"
    assert record.status == "admitted"
    groups = record.to_dict(result.table)["groups"]
    # node-2 and node-3 fail identically, so they form one group listing both names
    assert [(g["outcome"], g["node_count"], g["nodes"], g["reason"]) for g in groups] == [
        ("passed", 1, ["node-1"], None),
        ("filtered", 2, ["node-2", "node-3"],
         "task topology policy[single-numa-node] is different with node[best-effort]"),
    ]


def test_twenty_cpu_best_effort_task_goes_to_node_3():
    result = run_session(seed_cluster(), [job("vj-test", 20, "best-effort")], profile="volcano")
    record = result.pods[0]
    assert record.node == "node-3"
    assert record.predicted.numa_count == 1
    full = result.to_dict()
    data = full["pods"][0]
    by_node = {g["nodes"][0]: g for g in data["groups"]}
    # node-3 spans one NUMA node, node-2 two: 100 - 100*1/2 = 50 against 100 - 100*2/2 = 0
    assert by_node["node-3"]["score"] == 50
    assert by_node["node-2"]["score"] == 0
    assert full["verdicts"][str(by_node["node-2"]["verdict"])]["numa"] == [0, 1]
    assert record.status == "admitted"
    assert data["admitted_numa"] and len(data["admitted_numa"]) == 1
