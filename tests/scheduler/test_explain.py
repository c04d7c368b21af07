"""Explanations: the upstream summary format, the JSON schema, and bounded size with node classes."""

from __future__ import annotations

import json

from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.explain import SCHEMA, unavailable_message
from scheduler_core.scheduler.session import run_session

GiB = 2**30


def test_unavailable_message_sorts_entries_as_strings():
    # Volcano's FitErrors: "<count> <reason>" strings sorted lexically, N = nodes that failed
    msg = unavailable_message({"cpu manager policy isn't static": 3, "Insufficient cpu": 10, "numa info is empty": 2})
    assert msg == ("0/15 nodes are unavailable: 10 Insufficient cpu, 2 numa info is empty, "
                   "3 cpu manager policy isn't static.")
    assert unavailable_message({}) == "0/0 nodes are unavailable."


def mixed_cluster(n: int) -> Cluster:
    topo = synthetic(2, 2, 4, 2, memory_per_numa=16 * GiB)
    policies = ("single-numa-node", "best-effort", "restricted")
    kubelets = [KubeletConfig(cpu_manager_policy="static", topology_manager_policy=p) for p in policies]
    nodes = [Node(f"node-{i:03d}", topo, kubelets[i % 3], numatopology=i % 10 != 9) for i in range(n)]
    return Cluster(nodes)


def jobs(count: int, cpus: int = 2, policy: str = "single-numa-node", prefix: str = "j") -> list[Job]:
    pod = Pod("t", (Container.guaranteed("app", cpus * 1000, GiB),))
    return [Job(f"{prefix}{i}", (Task("t", pod, 1, policy),), min_available=1, submitted=i) for i in range(count)]


def test_schema_is_json_and_complete():
    result = run_session(mixed_cluster(30), jobs(5) + jobs(1, cpus=64, prefix="big"))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["schema"] == SCHEMA
    assert set(data) == {"schema", "profile", "weight", "nodes_total", "counts", "timings", "jobs", "pods",
                         "verdicts", "volcano_close"}
    assert set(data["counts"]) == {"pods", "placed", "unplaced", "admitted", "topology_affinity_errors",
                                   "admission_errors", "rolled_back", "single_numa", "cpu_prediction_mismatches"}
    by_pod = {p["pod"]: p for p in data["pods"]}
    first = by_pod["j0-t-0"]
    assert first["status"] == "admitted"
    assert first["predicted"]["numa"] == first["admitted_numa"] and len(first["admitted_numa"]) == 1
    assert sum(first["outcomes"].values()) == 30
    passed = [g for g in first["groups"] if g["outcome"] == "passed"]
    verdict = data["verdicts"][str(passed[0]["verdict"])]
    container = verdict["containers"][0]
    assert container["container"] == "app"
    assert container["hints"]["cpu"][0] == {"affinity": [0], "preferred": True}
    assert container["best_hint"] == {"affinity": [0], "preferred": True}
    assert container["admit"] is True
    reasons = {g["reason"] for g in first["groups"] if g["outcome"] == "filtered"}
    assert reasons == {"numa info is empty",
                       "task topology policy[single-numa-node] is different with node[best-effort]",
                       "task topology policy[single-numa-node] is different with node[restricted]"}
    big = by_pod["big0-t-0"]
    assert big["status"] == "unschedulable" and big["node"] is None
    assert big["message"].startswith("0/30 nodes are unavailable: ")
    assert "Insufficient cpu" in big["message"]
    assert data["counts"]["placed"] == 5 and data["counts"]["unplaced"] == 1


def test_explanation_size_is_bounded_by_classes_not_nodes():
    small = run_session(mixed_cluster(30), jobs(20))
    large = run_session(mixed_cluster(600), jobs(20))
    size_small = len(json.dumps(small.to_dict()))
    size_large = len(json.dumps(large.to_dict()))
    assert size_large < 2 * size_small  # 20x the nodes, not 20x the explanation
    for p in large.to_dict()["pods"]:
        assert sum(g["node_count"] for g in p["groups"]) + p["groups_omitted"]["nodes"] == 600
        assert all(len(g["nodes"]) <= 10 for g in p["groups"])


def test_group_cap_summarises_the_rest():
    result = run_session(mixed_cluster(30), jobs(3), explain_groups=1, explain_names=2)
    for p in result.to_dict()["pods"]:
        assert len(p["groups"]) == 1 and len(p["groups"][0]["nodes"]) <= 2
        assert p["groups"][0]["node_count"] + p["groups_omitted"]["nodes"] == 30


def _admitted_verdict(node: Node, pod: Pod):
    from scheduler_core.kubelet.admission import admit_pod
    from scheduler_core.scheduler.explain import NodeVerdict

    result = admit_pod(node, pod, commit=False)
    return NodeVerdict("passed" if result.admitted else "filtered", admission=result)


def test_verdict_signature_is_the_admission_content_not_the_objects():
    """Verdicts merge when their admissions say the same (built separately), and stay apart when one
    hint, one CPU or one memory block differs."""
    from scheduler_core.model.node import Allocation
    from scheduler_core.scheduler.explain import VerdictTable

    topo = synthetic(1, 2, 4, 2, memory_per_numa=16 * GiB)
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="best-effort",
                            memory_manager_policy="Static", reserved_memory={0: {"memory": GiB}})
    pod = Pod("p", (Container.guaranteed("c", cpu_milli=2000, memory=2 * GiB),))
    table = VerdictTable()
    a = table.intern(_admitted_verdict(Node("a", topo, kubelet), pod))
    b = table.intern(_admitted_verdict(Node("b", topo, kubelet), pod))
    assert a == b  # same content, different objects
    held = Node("c", topo, kubelet, [Allocation("other", "x", cpus=CPUSet([0, 8]))])
    c = table.intern(_admitted_verdict(held, pod))  # other CPUs pinned: another verdict
    assert c != a
    bigger = Pod("p", (Container.guaranteed("c", cpu_milli=2000, memory=3 * GiB),))
    d = table.intern(_admitted_verdict(Node("d", topo, kubelet), bigger))  # same CPUs, more memory
    assert d not in (a, c)
    restricted = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted",
                               memory_manager_policy="Static", reserved_memory={0: {"memory": GiB}})
    e = table.intern(_admitted_verdict(Node("e", topo, restricted), pod))  # the merge's policy differs
    assert e not in (a, c, d)
    assert len(table.items) == 4
