"""The pod scope (the kubelet's `scope_pod.go`): one merge of the pod-level hints; every container is
then allocated with that one hint."""

from __future__ import annotations

from ...model.pods import Pod
from .scope import Scope


class PodScope(Scope):
    def admit(self, pod: Pod) -> None:
        hint = self.merge(pod, None).hint
        for container in pod.all_containers():
            self.allocate(pod, container, hint)
