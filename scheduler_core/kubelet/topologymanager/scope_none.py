"""The none scope (the kubelet's `scope_none.go`): policy `none` merges nothing and admits every pod;
each container is allocated with the nil hint ("any NUMA node")."""

from __future__ import annotations

from ...model.pods import Pod
from .hint import TopologyHint
from .scope import Scope

ANY = TopologyHint(None, False)


class NoneScope(Scope):
    def admit(self, pod: Pod) -> None:
        for container in pod.all_containers():
            self.allocate(pod, container, ANY)
