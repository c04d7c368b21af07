"""Variant settings of the koordinator and kai profiles (`strategy`, `numa_strategy`, `cpu_bind_policy`,
`ignore_list`): checked per profile, kept through to_dict / from_dict, and handed to the engine profile so a
session decides differently with them."""

from __future__ import annotations

import pytest

from scheduler_core.errors import PolicyError, RequestError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.compare import Variant, run_variant
from scheduler_core.scheduler.plugin_profiles import KaiProfile, KoordinatorProfile, NRTProfile
from scheduler_core.scheduler.profile import ProfileSession
from scheduler_core.scheduler.session import run_session

GiB = 2**30
GPU = "nvidia.com/gpu"
LSR = {"koordinator.sh/qosClass": "LSR"}


def node(name: str, policy: str = "single-numa-node") -> Node:
    """2 NUMA nodes × 2 cores × 2 threads, 8 GiB each."""
    kubelet = KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy, topology_manager_scope="pod")
    return Node(name, synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB), kubelet)


def jobs_of(*pods: Pod) -> list[Job]:
    return [Job(f"j{i}", (Task("t", p),), submitted=i) for i, p in enumerate(pods)]


def test_koordinator_and_kai_settings_round_trip():
    koord = Variant.from_dict({"profile": "koordinator", "strategy": "MostAllocated", "numa_strategy": "MostAllocated",
                               "cpu_bind_policy": "SpreadByPCPUs", "ignore_list": None})
    data = koord.to_dict()
    assert (data["strategy"], data["numa_strategy"], data["cpu_bind_policy"], data["ignore_list"]) == \
        ("MostAllocated", "MostAllocated", "SpreadByPCPUs", None)
    assert Variant.from_dict(data) == koord
    assert koord.label == "koordinator · MostAllocated · NUMA MostAllocated · SpreadByPCPUs"
    kai = Variant.from_dict({"profile": "kai", "ignore_list": ["example.com/nic", GPU, "example.com/nic"]})
    assert kai.ignore_list == ("example.com/nic", GPU)  # sorted, once each
    assert kai.to_dict()["ignore_list"] == ["example.com/nic", GPU]
    assert Variant.from_dict(kai.to_dict()) == kai
    assert kai.label == "kai · ignoring example.com/nic,nvidia.com/gpu"
    # an empty list is no setting: the default, for kai or any other profile
    assert Variant.from_dict({"profile": "kai", "ignore_list": []}) == Variant("kai")
    assert Variant.from_dict({"profile": "volcano", "ignore_list": []}).to_dict()["ignore_list"] is None
    # a variant stored before these fields existed reads as upstream's defaults
    old = {"profile": "koordinator", "topology_manager_policy": None, "topology_manager_scope": None,
           "cpu_manager_options": None, "weight": 1, "distance_tie_break": False, "strategy": None}
    assert Variant.from_dict(old) == Variant("koordinator")


@pytest.mark.parametrize("data, error, text", [
    ({"profile": "aligned", "strategy": "MostAllocated"}, PolicyError,
     "strategy: only the nrt and koordinator profiles have a scoring strategy"),
    ({"profile": "kai", "strategy": "LeastAllocated"}, PolicyError, "strategy: only the nrt and koordinator"),
    ({"profile": "koordinator", "strategy": "LeastNUMANodes"}, PolicyError,
     "strategy: unknown Koordinator scoring strategy 'LeastNUMANodes'; expected one of: LeastAllocated, "
     "MostAllocated"),
    ({"profile": "nrt", "strategy": "Fastest"}, PolicyError, "strategy: unknown scoring strategy 'Fastest'; "
     "expected one of: LeastAllocated, MostAllocated, BalancedAllocation, LeastNUMANodes"),
    ({"profile": "nrt", "numa_strategy": "MostAllocated"}, PolicyError,
     "numa_strategy: only the koordinator profile has a NUMA scoring strategy"),
    ({"profile": "koordinator", "numa_strategy": "BalancedAllocation"}, PolicyError,
     "numa_strategy: unknown Koordinator NUMA scoring strategy 'BalancedAllocation'; expected one of: "
     "LeastAllocated, MostAllocated"),
    ({"profile": "volcano", "cpu_bind_policy": "FullPCPUs"}, PolicyError,
     "cpu_bind_policy: only the koordinator profile has a default CPU bind policy"),
    ({"profile": "koordinator", "cpu_bind_policy": "FullPCPUsOnly"}, PolicyError,
     "cpu_bind_policy: unknown Koordinator default CPU bind policy 'FullPCPUsOnly'; expected one of: FullPCPUs, "
     "SpreadByPCPUs"),
    ({"profile": "koordinator", "ignore_list": [GPU]}, PolicyError,
     "ignore_list: only the kai profile has an ignore list"),
    ({"profile": "kai", "ignore_list": GPU}, RequestError, "ignore_list: a list of resource names"),
    ({"profile": "kai", "ignore_list": [GPU, ""]}, RequestError, "ignore_list: a list of resource names"),
    ({"profile": "kai", "ignore_list": [GPU, 3]}, RequestError, "ignore_list: a list of resource names"),
    ({"profile": "kai", "ignore_list": {GPU: 1}}, RequestError, "ignore_list: a list of resource names"),
])
def test_a_setting_of_another_profile_or_a_bad_value_is_refused_naming_the_field(data, error, text):
    with pytest.raises(error) as raised:
        Variant.from_dict(data)
    assert str(raised.value).startswith(text)


def test_engine_profile_carries_the_settings():
    koord = Variant("koordinator", strategy="MostAllocated", numa_strategy="MostAllocated",
                    cpu_bind_policy="SpreadByPCPUs").engine_profile()
    assert koord == KoordinatorProfile(default_cpu_bind_policy="SpreadByPCPUs", scoring_strategy="MostAllocated",
                                       numa_scoring_strategy="MostAllocated")
    assert Variant("koordinator").engine_profile() == KoordinatorProfile()  # upstream's defaults
    assert Variant("koordinator", numa_strategy="MostAllocated").engine_profile() == \
        KoordinatorProfile(numa_scoring_strategy="MostAllocated")
    assert Variant("kai", ignore_list=(GPU,)).engine_profile() == KaiProfile(ignore_list=frozenset({GPU}))
    assert Variant("kai").engine_profile() == KaiProfile()
    assert Variant("nrt", strategy="MostAllocated", weight=3).engine_profile() == \
        NRTProfile(weight=3, strategy="MostAllocated")


def test_koordinator_scoring_strategies_change_the_placements():
    """Three 1-CPU pods on two nodes: each of the four (ScoringStrategy, NUMAScoringStrategy) pairs places them
    differently (MostAllocated node scoring packs node a, MostAllocated NUMA scoring packs NUMA node 0)."""
    pod = Pod("p", (Container.guaranteed("app", 1000, GiB),))
    placed = {}
    for strategy in (None, "MostAllocated"):
        for numa in (None, "MostAllocated"):
            variant = Variant("koordinator", strategy=strategy, numa_strategy=numa)
            result = run_session(Cluster([node("a"), node("b")]), jobs_of(pod, pod, pod),
                                 profile=variant.engine_profile())
            assert all(p.status == "admitted" and p.predicted is not None for p in result.pods)
            placed[strategy, numa] = [(p.node, p.predicted.numa_mask) for p in result.pods if p.predicted]
    assert placed == {(None, None): [("a", 0b01), ("a", 0b10), ("b", 0b01)],
                      (None, "MostAllocated"): [("a", 0b01), ("b", 0b01), ("a", 0b01)],
                      ("MostAllocated", None): [("a", 0b01), ("a", 0b10), ("a", 0b01)],
                      ("MostAllocated", "MostAllocated"): [("a", 0b01), ("a", 0b01), ("a", 0b01)]}


def test_cpu_bind_policy_decides_how_an_lsr_pods_cpus_are_bound(monkeypatch):
    """An LSR pod of koord-prod priority (9000) asking 2 CPUs: under the variant's DefaultCPUBindPolicy
    FullPCPUs the plugin binds both threads of one core, under SpreadByPCPUs one thread on each of two cores."""
    sessions: list[ProfileSession] = []
    open_session = KoordinatorProfile.open

    def keep(self: KoordinatorProfile, cluster: Cluster) -> ProfileSession:
        sessions.append(open_session(self, cluster))
        return sessions[-1]

    monkeypatch.setattr(KoordinatorProfile, "open", keep)
    lsr = Pod("lsr", (Container.guaranteed("app", 2000, GiB),), labels=LSR, priority=9000)
    cores = {}
    for policy in ("FullPCPUs", "SpreadByPCPUs"):
        result = run_session(Cluster([node("a", "none")]), jobs_of(lsr),
                             profile=Variant("koordinator", cpu_bind_policy=policy).engine_profile())
        assert [(p.node, p.status) for p in result.pods] == [("a", "admitted")]
        plugin = sessions[-1].plugin  # type: ignore[attr-defined]
        cpus = plugin.allocs["a"].pods[result.pods[0].uid].cpus
        topo = plugin.nodes["a"].cpu_topology
        assert len(cpus) == 2
        cores[policy] = len({topo.details[c].core for c in cpus})
    assert cores == {"FullPCPUs": 1, "SpreadByPCPUs": 2}


def test_kais_ignore_list_lets_a_misaligned_device_through():
    """NUMA 0 keeps 2 free CPUs and its GPU, NUMA 1 has 4 free CPUs and its GPU taken: a pod of 3 CPUs and a GPU
    fits no single zone. Kai filters the node; with the GPU on its ignore list it aligns CPU and memory alone,
    places the pod on NUMA 1, and the kubelet (which aligns the GPU) refuses it."""
    topo = synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB, devices_per_numa={GPU: 1})
    busy = Allocation("default/busy", "app", CPUSet.parse("0,4"), {}, {GPU: (topo.devices_of(GPU)[1].id,)})
    nodes = [Node("a", topo, KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node"),
                  [busy])]
    pod = Pod("p", (Container.guaranteed("app", 3000, GiB, devices={GPU: 1}),))
    plain = run_variant(nodes, jobs_of(pod), Variant("kai"))["metrics"]
    ignoring = run_variant(nodes, jobs_of(pod), Variant.from_dict({"profile": "kai", "ignore_list": [GPU]}))["metrics"]
    assert (plain["pods_unplaced"], plain["pods_rejected"]) == (1, 0)
    assert (ignoring["pods_placed"], ignoring["pods_rejected"], ignoring["topology_affinity_errors"]) == (1, 1, 1)
