"""The nrt profile in sessions and the questions built on them: its scoring strategies and weight choose the
node, nodes whose policy is not single-numa-node pass unchecked (so the kubelet may refuse there), its cache
takes what it placed from every zone (headroom counts that), and make room and the advisor accept it like
every profile of the registry."""

from __future__ import annotations

import pytest

from scheduler_core.errors import PolicyError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.compare import Shape, headroom
from scheduler_core.scheduler.defrag import advise
from scheduler_core.scheduler.profiles import PROFILES, NRTProfile
from scheduler_core.scheduler.room import make_room
from scheduler_core.scheduler.session import run_session

from .room_clusters import fragmented, gang

GiB = 2**30
SNN = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node")


def two_pods(cpus: int = 2) -> list[Job]:
    pod = Pod("t", (Container.guaranteed("app", cpus * 1000, GiB),))
    return [Job(f"j{i}", (Task("t", pod, 1),), min_available=1, submitted=i) for i in range(2)]


@pytest.mark.parametrize(("strategy", "second"), [("LeastAllocated", "n1"), ("MostAllocated", "n0"),
                                                  ("BalancedAllocation", "n0")])
def test_the_strategy_spreads_or_packs(strategy, second):
    """Two empty nodes of 2 NUMA x 4 CPUs (no memory stated, so CPU alone is scored). After the first pod
    (2 CPUs) on n0 its cache leaves 2 CPUs in each zone there: for the second pod LeastAllocated scores n0
    (2 - 2) * 100 // 2 = 0 against n1's 50 and spreads; MostAllocated scores n0 100 against 50 and packs;
    BalancedAllocation with one resource gets upstream's undefined variance (the smallest int64) on every node,
    a tie broken by name."""
    nodes = [Node(f"n{i}", synthetic(1, 2, 4, 1), SNN) for i in range(2)]
    result = run_session(Cluster(nodes), two_pods(), profile=NRTProfile(strategy=strategy))
    assert [p.node for p in result.pods] == ["n0", second]
    assert result.counts["admitted"] == 2


def test_the_plugin_weight_multiplies_the_score():
    nodes = [Node(f"n{i}", synthetic(1, 2, 4, 1), SNN) for i in range(2)]
    result = run_session(Cluster(nodes), two_pods()[:1], profile=NRTProfile(weight=3))
    assert result.pods[0].score == 3 * 50  # (4 - 2) * 100 // 4 in either zone
    assert result.weight == 3


def test_nodes_without_single_numa_node_pass_unchecked_and_the_kubelet_refuses():
    """scheduler-plugins#885: a restricted node is not checked. One CPU of each NUMA node is taken, so 4 CPUs
    fit no NUMA node alone; the nrt profile places the pod there (skipped, unscored) and the kubelet refuses it,
    where aligned finds it unschedulable."""
    restricted = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted")
    taken = Allocation("default/other", "app", CPUSet.parse("0,4"), origin="imported")
    pod = Pod("t", (Container.guaranteed("app", 4000, GiB),))
    outcomes = {}
    for profile in ("nrt", "aligned"):
        node = Node("r", synthetic(1, 2, 4, 1), restricted, [taken])
        result = run_session(Cluster([node]), [Job("j", (Task("t", pod, 1),))], profile=profile)
        outcomes[profile] = (result.pods[0].status.value, result.pods[0].kubelet_reason)
    assert outcomes == {"nrt": ("rejected", "TopologyAffinityError"), "aligned": ("unschedulable", None)}


def test_headroom_counts_the_over_reservation():
    """One single-numa-node node of 2 NUMA x 4 CPUs, pods of 2 CPUs: the kubelet would take four, the nrt
    profile places two (each placed pod is taken from both zones: 4 → 2 → 0). Guaranteed pods: a Burstable pod
    gets no exclusive CPUs, which the plugin lets through everywhere."""
    cluster = Cluster([Node("n", synthetic(1, 2, 4, 1), SNN)])
    shape = Shape.parse("2", "1Gi")
    assert headroom(cluster, shape, "aligned")["total"] == 4
    assert headroom(cluster, shape, "nrt")["total"] == 2


@pytest.mark.parametrize("profile", list(PROFILES))
def test_make_room_and_the_advisor_take_every_profile(profile):
    """room_clusters: each NUMA node holds a small pod, so the 16-CPU pod fits after one move, for every profile."""
    plan = make_room(Cluster(fragmented(2)), gang(1, name="train-a"), profile, time_limit=20)
    assert (plan.found, plan.fits_now, len(plan.moves)) == (True, False, 1)
    cluster = Cluster(fragmented(2))
    ranked = advise(cluster, [gang(1, name="train-a"), gang(1, cpus=4, name="small")], profile,
                    time_limit=20).to_dict(cluster)["jobs"]
    assert [(j["job"], j["fits_now"], j["moves"]) for j in ranked] == [("ml/small", True, 0), ("ml/train-a", False, 1)]


def test_bad_options_are_refused_naming_them():
    with pytest.raises(PolicyError, match="strategy: unknown scoring strategy 'Fastest'"):
        NRTProfile(strategy="Fastest")
    with pytest.raises(PolicyError, match="resource_weights"):
        NRTProfile(resource_weights=(("", 1),))
