"""The kubelet's admission, remembered within a session (ENGINE.md §4): a node's admission of a pod reads
the node's shape and settings, its free CPUs, the devices in use and the memory held per NUMA node, and of
the pod only its QoS class and containers. Two admissions that agree on all of that make the same
decisions and pin the same resources, so the second is the first relabelled for its pod and node.

Only admissions that admitted are remembered (a rejection's text may name the pod), and nodes with the
static Memory Manager are always admitted afresh (its NUMA groups are not in the state read here)."""

from __future__ import annotations

from collections.abc import Hashable

from ..kubelet.admission import AdmitResult, admit_pod
from ..model.node import Node
from ..model.pods import Container, Pod
from .cluster import Cluster


def kubelet_state(node: Node) -> Hashable:
    """Free CPUs, devices in use, memory used per NUMA node (None when none is: the Memory Manager is
    not static or holds nothing)."""
    used = node.used_devices
    memory = None
    if any(node.memory_used.values()):
        memory = tuple((n, tuple(sorted((r, v) for r, v in res.items() if v)))
                       for n, res in sorted(node.memory_used.items()))
        if not any(amounts for _n, amounts in memory):
            memory = None
    return (node.free_cpus, frozenset(used) if used else None, memory)


#: a container as the kubelet reads it: (name, kind, sorted requests, sorted limits)
ContainerKey = tuple[str, str, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]
#: a pod as the kubelet reads it: (QoS class, init containers, containers)
KubeletReading = tuple[str, tuple[ContainerKey, ...], tuple[ContainerKey, ...]]


def _container_key(c: Container) -> ContainerKey:
    return (c.name, c.kind, tuple(sorted(c.requests.items())), tuple(sorted(c.limits.items())))


def kubelet_reading(pod: Pod) -> KubeletReading:
    """The pod as the kubelet reads it: QoS class and containers, not the task's topology policy nor the
    pod's labels, annotations or priority (pods that differ only there get the same admission)."""
    return (pod.qos_class, tuple(map(_container_key, pod.init_containers)),
            tuple(map(_container_key, pod.containers)))


class Admissions:
    """Admissions (without commit) on a cluster's nodes, remembered by (node shape and settings, the
    node's `kubelet_state`, the pod's `kubelet_reading`)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.known: dict[tuple[int, Hashable, Hashable], AdmitResult] = {}

    def admit(self, name: str, pod: Pod, reading: Hashable) -> AdmitResult:
        """The kubelet's admission of `pod` on node `name`, not committed: run, or the same admission made
        for another pod that reads the same on a node in the same state, relabelled."""
        node = self.cluster.nodes[name]
        if node.kubelet.static_memory:
            return admit_pod(node, pod, commit=False)
        key = (self.cluster.static_id(name), kubelet_state(node), reading)
        known = self.known.get(key)
        if known is not None:
            return known.relabeled(name, pod.uid)
        res = admit_pod(node, pod, commit=False)
        if res.admitted:
            self.known[key] = res
        return res
