"""The container scope (the kubelet's `scope_container.go`): one merge per container, in the order
the containers start; a container is allocated right after its own hint is admitted."""

from __future__ import annotations

from ...model.pods import Pod
from .scope import Scope


class ContainerScope(Scope):
    def admit(self, pod: Pod) -> None:
        for container in pod.all_containers():
            self.allocate(pod, container, self.merge(pod, container).hint)
