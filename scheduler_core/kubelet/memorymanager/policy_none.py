"""The Memory Manager's `None` policy (the kubelet's `policy_none.go`): no hints, nothing pinned. The
admission still asks it, so the providers are the same three whatever the node's settings."""

from __future__ import annotations

from ...model.node import Allocation
from ...model.pods import Container, Pod
from ..topologymanager.hint import TopologyHint
from .state import MEMORY


class NoneMemoryManager:
    resource = MEMORY

    def get_topology_hints(self, pod: Pod, container: Container) -> None:
        return None

    def get_pod_topology_hints(self, pod: Pod) -> None:
        return None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> Allocation:
        return Allocation(pod.uid, container.name)
