"""Successive volcano sessions on a Volcano-managed cluster through the scheduler cache (ENGINE.md §3.8):
a pod Volcano placed keeps its predicted CPUs out of Volcano's view until the exporter reports it
pinned, or it is deleted."""

from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.profiles import VolcanoProfile
from scheduler_core.scheduler.session import run_session
from scheduler_core.volcano.cache import NumaCache, PodMeta

GiB = 1 << 30
GPU = "nvidia.com/gpu"


def gpu_job(name: str) -> Job:
    pod = Pod("t", (Container.guaranteed("app", 2000, GiB, devices={GPU: 1}),))
    return Job(name, (Task("t", pod, 1, "restricted"),))


def cluster() -> Cluster:
    """One restricted node whose only free GPU is on NUMA 1, where no CPU is free: Volcano (CPU only)
    places a CPU+GPU pod on NUMA 0 and the kubelet rejects it."""
    topo = synthetic(1, 2, 4, 2, devices_per_numa={GPU: 1})
    busy = [Allocation("default/other", "app", CPUSet(), devices={GPU: ("gpu0",)}, origin="imported"),
            Allocation("default/cpus", "app", CPUSet.parse("4-7,12-15"), origin="imported")]
    return Cluster([Node("a", topo, KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted"),
                         busy)])


def again(c: Cluster) -> Cluster:
    """The next session's cluster: the same nodes as they are now (the scheduler's tally starts afresh)."""
    return Cluster(c.nodes.values())


def test_an_unpinned_placement_preoccupies_its_cpus_until_the_pod_is_deleted():
    c = cluster()
    cache = NumaCache.of_cluster(c)
    profile = VolcanoProfile(cache=cache)
    first = run_session(c, [gpu_job("one")], profile=profile).pods[0]
    assert first.status == "rejected" and first.kubelet_reason == "TopologyAffinityError"
    held = first.predicted.cpus
    assert held and CPUSet(held) <= CPUSet.parse("0-3,8-11")
    meta = PodMeta(first.uid, first.pod, first.namespace)
    assert cache.unassigned("a") == {meta: {"cpu": held}}

    cache.republish(c)  # the kubelet pinned nothing for it, so the exporter does not report it
    second = run_session(again(c), [gpu_job("two")], profile=profile).pods[0]
    assert second.predicted.cpus and not second.predicted.cpus & held  # Volcano still counts them as taken

    # without the cache, every session starts from the kubelet's state and predicts the same CPUs again
    without = run_session(again(c), [gpu_job("three")], profile=VolcanoProfile()).pods[0]
    assert without.predicted.cpus == held

    cache.delete_pod(meta, "a")
    cache.delete_pod(PodMeta(second.uid, second.pod, second.namespace), "a")
    third = run_session(again(c), [gpu_job("four")], profile=profile).pods[0]
    assert third.predicted.cpus == held


def test_a_pinned_pod_clears_the_node_once_the_exporter_reports_it():
    c = Cluster([Node("b", synthetic(1, 2, 4, 2), KubeletConfig(cpu_manager_policy="static",
                                                                 topology_manager_policy="best-effort"))])
    cache = NumaCache.of_cluster(c)
    pod = Pod("t", (Container.guaranteed("app", 2000, GiB),))
    result = run_session(c, [Job("j", (Task("t", pod, 1, "best-effort"),))], profile=VolcanoProfile(cache=cache))
    assert result.pods[0].status == "admitted"
    assert len(cache.unassigned("b")) == 1
    cache.republish(c)
    view = cache.refresh("b")
    assert cache.unassigned("b") is None  # every pod Volcano placed there is now reported pinned
    assert view.numares["cpu"][0] == c.node("b").free_cpus
