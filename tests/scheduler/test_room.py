"""scheduler_core.scheduler.room: make room for a pending target with the fewest pod moves, checked against an
exhaustive search on random small clusters, on the fragmented cluster of room_clusters, and for what
may not move."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.errors import RequestError
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.room import make_room
from scheduler_core.scheduler.room_moves import Rules, order_moves, put_on, running_pods, take_off
from scheduler_core.scheduler.session import gang_minimum, run_session

from .room_clusters import GiB, fragmented, gang

POLICIES = ("single-numa-node", "restricted", "best-effort", "none")
TOPOLOGIES = (synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB), synthetic(1, 2, 4, 1, memory_per_numa=8 * GiB),
              synthetic(2, 1, 3, 1, memory_per_numa=8 * GiB))


def _pod(name: str, namespace: str, cpus: int) -> Pod:
    return Pod(name, (Container.guaranteed("app", cpus * 1000, GiB // 4),), namespace=namespace)


@st.composite
def instances(draw, max_nodes: int = 8, max_pods: int = 30):
    """A random cluster of small machines filled by real admissions, and a target gang."""
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy=draw(st.sampled_from(POLICIES)))
        nodes.append(Node(f"n{i}", draw(st.sampled_from(TOPOLOGIES)), kubelet))
    for k in range(draw(st.integers(min(max_pods, 3 * len(nodes)), min(max_pods, 4 * len(nodes))))):
        node = nodes[draw(st.integers(0, len(nodes) - 1))]
        namespace = draw(st.sampled_from(("batch", "batch", "batch", "kube-system")))
        admit_pod(node, _pod(f"p{k}", namespace, draw(st.integers(1, 2))), commit=True)
    cpus = draw(st.integers(3, 4))
    count = draw(st.integers(1, 3))
    policy = draw(st.sampled_from(("single-numa-node", "restricted", None)))
    target = Job("t", (Task("w", _pod("w", "ml", cpus), count, policy),), namespace="ml")
    return nodes, target


def exhaustive(cluster: Cluster, job: Job, rules: Rules, max_moves: int) -> tuple[int, int] | None:
    """The cheapest valid plan by brute force: every set of movable pods in (count, CPUs) order, taken
    off; the target's session must commit with no admission error and use every node a pod left; then
    every destination for every pod taken off (in the order moves are carried out) until all are
    admitted again. Returns (pods moved, CPUs moved) or None."""
    target = {pod.uid for _t, pod in job.pods()}
    movable = [p for p in running_pods(cluster) if rules.refusal(p, target) is None]
    sets = [s for k in range(1, max_moves + 1) for s in combinations(movable, k)]
    sets.sort(key=lambda s: (len(s), sum(p.cpu_count for p in s)))
    for pods in sets:
        work = cluster.copy()
        for pod in pods:
            take_off(work, pod)
        result = run_session(work, [job], profile="aligned")
        counts = result.counts
        if counts["topology_affinity_errors"] or counts["admission_errors"] or not result.jobs[0]["committed"]:
            continue
        if {p.node for p in pods} - {r.node for r in result.pods if r.status == "admitted"}:
            continue

        def place(rest, state) -> bool:
            if not rest:
                return True
            for name in sorted(state.nodes):
                trial = state.copy()
                if put_on(trial, rest[0], name) is not None and place(rest[1:], trial):
                    return True
            return False

        if place(order_moves(pods), work):
            return len(pods), sum(p.cpu_count for p in pods)
    return None


def replay(cluster: Cluster, job: Job, plan) -> dict:
    """Carry a plan out by hand on a copy: take every pod off, run the target, admit each moved pod
    where the plan says and check it gets the CPUs the plan says."""
    work = cluster.copy()
    for m in [*plan.moves, *plan.evictions]:
        take_off(work, m.pod)
    counts = run_session(work, [job], profile="aligned").counts
    for m in plan.moves:
        got = put_on(work, m.pod, m.to_node)
        assert got is not None and got.to_cpus == m.to_cpus
    return counts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instances())
def test_fewest_moves_equal_an_exhaustive_search(instance):
    nodes, job = instance
    cluster = Cluster(nodes)
    rules = Rules()
    plan = make_room(cluster, job, rules=rules, max_moves=2, time_limit=60)
    if plan.fits_now:
        assert not plan.moves
        return
    expected = exhaustive(cluster, job, rules, 2)
    if expected is None:
        assert not plan.found
        movable = [p for p in running_pods(cluster) if rules.refusal(p, {q.uid for _t, q in job.pods()}) is None]
        assert plan.stats["movable"] == len(movable) and plan.lower_bound <= len(movable)
        if plan.reason.startswith(("no node can ever take", "even with every node empty")):
            empty = Cluster(Node(n.name, n.topology, n.kubelet) for n in nodes)  # every node empty: still too few
            fits = run_session(empty, [replace(job, min_available=1)], profile="aligned").counts["admitted"]
            assert fits < gang_minimum(job) and (fits == 0) == plan.reason.startswith("no node") and \
                plan.lower_bound == 0
        elif len(movable) <= 2:  # every set of movable pods was tried: none makes room, however many moves
            assert plan.reason.startswith(f"moving any of the {len(movable)} movable pods does not make room")
            assert plan.lower_bound == 0
        else:
            assert plan.lower_bound == 3 and "at most 2 moves" in plan.reason
        return
    assert plan.found and plan.minimal
    assert (len(plan.moves), plan.moved_cpus) == expected
    counts = replay(cluster, job, plan)
    assert counts["topology_affinity_errors"] == 0 and counts["placed"] >= job.min_available


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instances(max_nodes=4, max_pods=14))
def test_fewest_moves_up_to_three(instance):
    nodes, job = instance
    cluster = Cluster(nodes)
    plan = make_room(cluster, job, max_moves=3, time_limit=60)
    if plan.fits_now:
        return
    expected = exhaustive(cluster, job, Rules(), 3)
    assert plan.found == (expected is not None)
    if expected is not None:
        assert plan.minimal and (len(plan.moves), plan.moved_cpus) == expected


def test_fragmented_gang_fits_after_exactly_one_move_per_pod():
    cluster = Cluster(fragmented(6))
    job = gang(4)
    before = run_session(cluster.copy(), [job], profile="aligned").counts
    assert before["placed"] == 0
    plan = make_room(cluster, job)
    assert plan.found and not plan.fits_now and plan.minimal
    assert len(plan.moves) == 4 and plan.moved_cpus == 8 and plan.lower_bound == 4
    assert plan.check.result.counts["placed"] == 4
    assert plan.check.result.counts["topology_affinity_errors"] == 0
    freed = {(m.pod.node, m.pod.numa(cluster)[0]) for m in plan.moves}
    assert len(freed) == 4  # one NUMA node freed per pod of the gang
    assert replay(cluster, job, plan)["placed"] == 4
    # the cluster given is left as it was
    assert all(len(n.allocations) == 2 for n in cluster)


def test_a_gang_needs_as_many_nodes_as_pods_when_only_one_move_fits_each():
    job = gang(3, cpus=16)
    assert len(make_room(Cluster(fragmented(2)), job).moves) == 3
    assert not make_room(Cluster(fragmented(2)), gang(5)).found


def test_protected_pinned_and_high_priority_pods_do_not_move():
    cluster = Cluster(fragmented(3))
    job = gang(1)
    assert make_room(cluster, job, rules=Rules(protected_namespaces={"batch"})).found is False
    assert make_room(cluster, job, rules=Rules(pinned=("batch/*",))).found is False
    priorities = {p.uid: 5 for p in running_pods(cluster)}
    assert not make_room(cluster, job, priorities=priorities, rules=Rules(max_priority=5)).found
    assert make_room(cluster, job, priorities=priorities, rules=Rules(max_priority=6)).found
    # pinning all but one pod leaves exactly that one to move
    plan = make_room(cluster, job, rules=Rules(pinned=("batch/small-0-*", "batch/small-1-*", "batch/small-2-0")))
    assert [m.pod.uid for m in plan.moves] == ["batch/small-2-1"]
    assert "pinned" in plan.stats["not_movable"]


def test_evictions_only_when_moves_cannot_and_only_of_lower_priority():
    # one node, both NUMA nodes taken by a 2-CPU pod; a 16-CPU pod and a 14-CPU pod: nowhere to put
    # the small pods once the target is in, so moves cannot do it
    cluster = Cluster(fragmented(1))
    pod = Pod("w", (Container.guaranteed("app", 16000, GiB),))
    job = Job("t", (Task("a", pod, 1, "single-numa-node"), Task("b", pod, 1, "single-numa-node")), namespace="ml",
              priority=10)
    assert not make_room(cluster, job).found
    plan = make_room(cluster, job, rules=Rules(allow_evictions=True))
    assert plan.found and not plan.moves and len(plan.evictions) == 2
    assert plan.check.result.counts["placed"] == 2
    priorities = {p.uid: 10 for p in running_pods(cluster)}
    assert not make_room(cluster, job, priorities=priorities, rules=Rules(allow_evictions=True)).found


def test_fits_now_needs_no_move():
    cluster = Cluster(fragmented(2))
    plan = make_room(cluster, gang(2, cpus=8))
    assert plan.fits_now and plan.found and not plan.moves and plan.lower_bound == 0


def test_bad_input_is_refused():
    cluster = Cluster(fragmented(1))
    with pytest.raises(RequestError, match="max_moves"):
        make_room(cluster, gang(1), max_moves=0)
    with pytest.raises(RequestError, match="max_priority"):
        Rules(max_priority="high")


def test_a_node_with_too_many_movable_pods_is_searched_but_not_claimed_minimal():
    # 18 CPUs on one NUMA node, 17 movable 1-CPU pods: a 3-CPU pod needs 2 of them moved; pairs of a node
    # with more than MAX_NODE_PODS movable pods come from its 16 smallest only, so the plan is not proven
    from scheduler_core.scheduler.room import MAX_NODE_PODS

    node = Node("big", synthetic(1, 1, 18, 1, memory_per_numa=64 * GiB), KubeletConfig(
        cpu_manager_policy="static", topology_manager_policy="single-numa-node"))
    for k in range(MAX_NODE_PODS + 1):
        admit_pod(node, _pod(f"p{k}", "batch", 1), commit=True)
    # a spare node for the moved pods, too small in memory for the target's 16 GiB pods
    spare = Node("spare", synthetic(1, 1, 4, 1, memory_per_numa=8 * GiB), KubeletConfig(cpu_manager_policy="static"))
    cluster = Cluster([node, spare])

    def target(cpus: int) -> Job:
        pod = Pod("w", (Container.guaranteed("app", cpus * 1000, 16 * GiB),), namespace="ml")
        return Job("t", (Task("w", pod, 1, "single-numa-node"),), namespace="ml")

    two = make_room(cluster, target(2))
    assert two.found and len(two.moves) == 1 and two.minimal  # single moves are never left out
    three = make_room(cluster, target(3))
    assert three.found and len(three.moves) == 2 and three.check.ok
    assert not three.minimal and three.lower_bound == 2
