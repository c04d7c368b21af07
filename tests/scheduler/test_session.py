"""run_session: seed 000 examples, gang commit/rollback, determinism, progress, bad input."""

from __future__ import annotations

import random
from typing import ClassVar

import pytest

from scheduler_core.errors import EngineError, PolicyError, RequestError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import CPU, Topology, synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.explain import FILTERED, NodeVerdict, PodStatus
from scheduler_core.scheduler.profiles import Profile, ProfileSession
from scheduler_core.scheduler.session import run_session
from scheduler_core.volcano.cpumanager.provider import NumaModel
from scheduler_core.volcano.numaaware import VolcanoTask, predicate
from scheduler_core.volcano.policy import Hint, policy_predicate

GiB = 2**30


def upstream_8cpu() -> Topology:
    """Seed 000 §11 / Volcano's test machine: NUMA 0 = CPUs 0-3, NUMA 1 = CPUs 4-7, 2 threads per core."""
    return Topology([CPU(i, i // 2, i // 4, i // 4, i // 4) for i in range(8)])


def static(policy: str) -> KubeletConfig:
    return KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy)


def one_pod_job(name: str, cpus: int, policy: str | None, *, memory: int = GiB, submitted: int = 0) -> Job:
    pod = Pod("t", (Container.guaranteed("app", cpus * 1000, memory),))
    return Job(name, (Task("t", pod, 1, policy),), min_available=1, submitted=submitted)


def node_x(policy: str, busy: str) -> Node:
    return Node("node-x", upstream_8cpu(), static(policy),
                [Allocation("default/busy", "app", CPUSet.parse(busy), origin="imported")])


# -- seed 000 §11 --------------------------------------------------------------------------------
def test_seed000_s11_best_effort_three_cpus_on_numa1():
    """CPUs 0,1 busy, 3-CPU best-effort task: hints [{1} preferred, {0,1}], CPUs {4,5,6}."""
    node = node_x("best-effort", "0-1")
    model = NumaModel.from_node(node)
    free = node.free_cpus
    task = VolcanoTask.from_pod(one_pod_job("j", 3, "best-effort").pods()[0][1])
    verdict = predicate(task, model, free)
    assert verdict.outcome == "pass_assigned"
    decision = verdict.containers[0]
    assert decision.hints == [Hint(0b10, True), Hint(0b11, False)]
    assert decision.best == Hint(0b10, True)
    assert CPUSet(verdict.assignment) == CPUSet([4, 5, 6])
    result = run_session(Cluster([node_x("best-effort", "0-1")]), [one_pod_job("j", 3, "best-effort")])
    record = result.pods[0]
    assert record.status == "admitted" and record.node == "node-x"
    assert CPUSet(record.admitted_cpus()) == CPUSet([4, 5, 6])


def test_seed000_s11_single_numa_node_with_two_free_is_rejected():
    """single-numa-node, only 2 CPUs free on NUMA 1 (and 2 on NUMA 0): a 3-CPU pod is rejected."""
    cluster = Cluster([node_x("single-numa-node", "0-1,6-7")])
    result = run_session(cluster, [one_pod_job("j", 3, "single-numa-node")])
    record = result.pods[0]
    assert record.status == "unschedulable"
    assert record.message == "0/1 nodes are unavailable: 1 container app cannot be assigned by numa."
    # best-effort on the same free state accepts the cross-NUMA answer
    result = run_session(Cluster([node_x("best-effort", "0-1,6-7")]), [one_pod_job("j", 3, "best-effort")])
    assert result.pods[0].status == "admitted"
    assert result.pods[0].predicted.numa_count == 2


# -- seed 000 §8 ---------------------------------------------------------------------------------
def test_seed000_s8_fewer_numa_nodes_score_higher():
    """Node-A can hold the task on NUMA 0, Node-B only across NUMA 0+1: Node-A scores higher."""
    a = Node("Node-A", upstream_8cpu(), static("best-effort"))
    b = Node("Node-B", upstream_8cpu(), static("best-effort"),
             [Allocation("default/busy", "app", CPUSet.parse("3,7"), origin="imported")])
    result = run_session(Cluster([b, a]), [one_pod_job("j", 4, "best-effort")])
    data = result.to_dict()["pods"][0]
    scores = {g["nodes"][0]: g["score"] for g in data["groups"]}
    assert scores == {"Node-A": 50, "Node-B": 0}
    assert data["node"] == "Node-A"
    assert data["predicted"]["numa"] == [0]


def test_tie_break_is_score_then_numa_span_then_name():
    nodes = [Node(name, upstream_8cpu(), static("best-effort")) for name in ("n-c", "n-a", "n-b")]
    result = run_session(Cluster(nodes), [one_pod_job("j", 2, "best-effort")])
    assert result.pods[0].node == "n-a"
    # without a task policy nothing is scored: fewest NUMA nodes first, then name
    frag = Node("n-0", upstream_8cpu(), static("best-effort"),
                [Allocation("default/busy", "app", CPUSet.parse("1-3,5-7"), origin="imported")])
    whole = Node("n-1", upstream_8cpu(), static("best-effort"))
    result = run_session(Cluster([frag, whole]), [one_pod_job("j", 2, None)])
    assert result.pods[0].score is None
    assert result.pods[0].node == "n-1"


def test_fast_best_hint_equals_full_merge():
    """NumaModel.best_hint (no hint list) agrees with the legacy merge over the full hint list."""
    rng = random.Random(5)
    for shape in ((1, 2, 4, 2), (2, 2, 3, 1), (2, 4, 2, 2), (1, 3, 2, 1)):
        topo = synthetic(*shape)
        model = NumaModel.from_node(Node("n", topo, static("best-effort")))
        for _ in range(150):
            free = 0
            for cpu in range(topo.all_cpus.bit_length()):
                if rng.random() < 0.6:
                    free |= 1 << cpu
            req = rng.randint(1, topo.all_cpus.bit_count())
            counts = model.free_counts(free)
            hints = model.hints_for(counts, req)
            for policy in ("best-effort", "restricted", "single-numa-node", "none"):
                assert model.best_hint(counts, req, policy) == policy_predicate(
                    policy, model.numa_ids, [{"cpu": hints}]), (shape, policy, counts, req)


# -- gang ----------------------------------------------------------------------------------------
def cluster_state(cluster: Cluster) -> list:
    return [(n.name, [a.to_dict() for a in n.allocations], n.free_cpus, sorted(n.used_devices),
             {k: dict(v) for k, v in n.memory_used.items()}, cluster.tally[n.name].key(),
             cluster.numa_free[n.name]) for n in cluster]


def test_gang_rollback_leaves_no_allocations():
    topo = synthetic(1, 2, 4, 2, memory_per_numa=32 * GiB)  # 16 CPUs, 8 per NUMA node
    cluster = Cluster([Node(f"n{i}", topo, static("single-numa-node")) for i in range(2)])
    before = cluster_state(cluster)
    pod = Pod("t", (Container.guaranteed("app", 8000, GiB),))
    # 4 NUMA nodes of 8 CPUs: 4 replicas fit, 5 do not; minAvailable 5 → nothing may stay
    job = Job("gang", (Task("w", pod, 5, "single-numa-node"),), min_available=5)
    result = run_session(cluster, [job])
    statuses = [p.status for p in result.pods]
    assert statuses.count("rolled_back") == 4 and statuses.count("unschedulable") == 1
    assert result.jobs[0]["committed"] is False
    assert cluster_state(cluster) == before
    assert all(not n.allocations for n in cluster)
    assert result.volcano_close == []
    # in the same session, a later job sees every CPU again (the plugin's free view was given back too)
    after = Job("after", (Task("w", pod, 4, "single-numa-node"),), min_available=4, submitted=1)
    result = run_session(cluster.copy(), [job, after])
    assert [p.status for p in result.pods[5:]] == ["admitted"] * 4
    assert [e["task_uid"] for e in result.volcano_close] == [p.uid for p in result.pods[5:]]
    # the same job with minAvailable 4 keeps its four placements
    ok = Job("gang", (Task("w", pod, 5, "single-numa-node"),), min_available=4)
    result = run_session(cluster, [ok])
    assert result.jobs[0]["committed"] is True
    assert sum(len(n.allocations) for n in cluster) == 4
    assert len(result.volcano_close) == 4


def test_failed_gang_does_not_disturb_earlier_jobs():
    topo = synthetic(1, 2, 4, 2)
    cluster = Cluster([Node("n0", topo, static("best-effort"))])
    first = one_pod_job("first", 4, "best-effort")
    pod = Pod("t", (Container.guaranteed("app", 4000, GiB),))
    gang = Job("gang", (Task("w", pod, 4, "best-effort"),), min_available=4, submitted=1)
    result = run_session(cluster, [first, gang])
    assert result.pods[0].status == "admitted"
    assert [a.pod for a in cluster.node("n0").allocations] == ["default/first-t-0"]
    assert result.counts["rolled_back"] == 3


def test_jobs_run_by_priority_then_submission():
    topo = upstream_8cpu()
    cluster = Cluster([Node("n0", topo, static("best-effort"))])
    low = one_pod_job("low", 8, "best-effort", submitted=0)
    pod = Pod("t", (Container.guaranteed("app", 8000, GiB),))
    high = Job("high", (Task("t", pod, 1, "best-effort"),), priority=5, submitted=9)
    result = run_session(cluster, [low, high])
    assert [p.job for p in result.pods] == ["high", "low"]
    assert result.pod("high-t-0").status == "admitted"
    assert result.pod("low-t-0").message == "0/1 nodes are unavailable: 1 Insufficient cpu."


def test_progress_and_determinism():
    topo = synthetic(2, 2, 4, 2)
    jobs = [one_pod_job(f"j{i}", 1 + i % 5, ("best-effort", "restricted", None)[i % 3], submitted=i) for i in range(30)]

    def build():
        return Cluster([Node(f"n{i}", topo, static(("best-effort", "restricted")[i % 2])) for i in range(6)])
    calls = []
    first = run_session(build(), jobs, progress=lambda d, t: calls.append((d, t)))
    second = run_session(build(), jobs)
    assert calls[-1] == (30, 30)
    assert [d for d, _t in calls] == sorted(d for d, _t in calls)
    assert first.placements() == second.placements()
    a, b = first.to_dict(), second.to_dict()
    a.pop("timings"), b.pop("timings")
    assert a == b


def test_equivalence_classes_match_per_node_evaluation():
    """Grouping identical nodes must not change any decision: a cluster of distinct-but-equal nodes
    gives the same placements as the same nodes made unique by a harmless distinct allocation."""
    topo = synthetic(1, 2, 4, 2)
    jobs = [one_pod_job(f"j{i}", 1 + i % 4, "best-effort", submitted=i) for i in range(12)]
    result = run_session(Cluster([Node(f"n{i}", topo, static("best-effort")) for i in range(4)]), jobs)
    assert result.timings["evaluations"] < 12 * 4
    for p in result.pods:
        assert sum(g["node_count"] for g in p.to_dict(result.table)["groups"]) == 4


# -- bad input -----------------------------------------------------------------------------------
def test_bad_input_errors_name_the_field():
    pod = Pod("t", (Container.guaranteed("app", 1000, GiB),))
    with pytest.raises(RequestError, match="task name 'w' is used twice"):
        Job("j", (Task("w", pod), Task("w", pod)))
    with pytest.raises(RequestError, match=r"minAvailable \(3\) is more than its 2 replicas"):
        Job("j", (Task("w", pod, 2),), min_available=3)
    with pytest.raises(RequestError, match="request cpu cannot be negative"):
        Container("app", {"cpu": -1000})
    with pytest.raises(RequestError, match="must be an integer"):
        Container("app", {"cpu": 1.5})
    with pytest.raises(RequestError, match="replicas must be an integer"):
        Task("w", pod, 1.5)
    with pytest.raises(PolicyError, match="unknown topology policy 'numa-please'"):
        Task("w", pod, 1, "numa-please")
    cluster = Cluster([Node("n0", upstream_8cpu(), static("best-effort"))])
    with pytest.raises(PolicyError, match="unknown scheduler profile 'fastest'"):
        run_session(cluster, [], profile="fastest")
    with pytest.raises(RequestError, match="weight must be an integer"):
        run_session(cluster, [], weight=1.5)
    with pytest.raises(RequestError, match="jobs must be Job objects"):
        run_session(cluster, [pod])
    job = one_pod_job("j", 1, None)
    with pytest.raises(RequestError, match="submitted twice"):
        run_session(cluster, [job, job])
    with pytest.raises(RequestError, match="node name 'n0' is used twice"):
        Cluster([Node("n0", upstream_8cpu()), Node("n0", upstream_8cpu())])
    assert issubclass(RequestError, EngineError)
    assert not cluster.node("n0").allocations


def test_a_profile_that_rejects_without_a_reason_is_not_reported_as_none():
    """A rejection's reason keys the FitErrors message: a profile (any `Profile` object may be passed)
    that filters a node without one got "3 None" in the message, a reason named after Python's null."""
    class Silent(ProfileSession):
        def evaluate(self, name, pod, prepared):
            return NodeVerdict(FILTERED)

    class SilentProfile(Profile):
        name: ClassVar[str] = "silent"
        summary: ClassVar[str] = "filters every node and says nothing"

        def open(self, cluster):
            return Silent()

    nodes = [Node(f"n{i}", synthetic(1, 1, 4, 1), static("none")) for i in range(3)]
    result = run_session(Cluster(nodes), [one_pod_job("j", 1, None)], profile=SilentProfile())
    message = result.pods[0].message
    assert result.pods[0].status == PodStatus.UNSCHEDULABLE
    assert "None" not in message and message.startswith("0/3 nodes are unavailable: 3 ")
