"""The plugin's reserve cache (scheduler-plugins `cache/overreserve.go`, `cache/store.go`): between two
updates of a node's NRT object the scheduler cannot know which zone the kubelet gave a pod it bound
there, so Reserve records the pod's effective request and every later read of that node's zones
subtracts each assumed pod from *every* zone (floored at 0): pessimistic, never optimistic. Unreserve
forgets the pod. Within a session the NRT objects are those the exporter published when it began.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .zones import Zone


class OverReserve:
    """Assumed pods per node (keyed `namespace/name`, as upstream) over the zones read at the start."""

    def __init__(self, zones: Mapping[str, Sequence[Zone] | None]) -> None:
        self.nrts = dict(zones)
        self.assumed: dict[str, dict[str, dict[str, int]]] = {}
        #: per node with assumed pods, its zones with them taken off (read far more often than changed)
        self.views: dict[str, list[Zone]] = {}

    def reserve(self, node: str, pod_key: str, request: Mapping[str, int]) -> bool:
        """ReserveNodeResources; whether the pod was assumed there already. Nothing is kept for a
        node without an NRT object."""
        if self.nrts.get(node) is None:
            return False
        pods = self.assumed.setdefault(node, {})
        known = pod_key in pods
        pods[pod_key] = dict(request)
        if known:
            self._rebuild(node)
        else:  # taking amounts off with a floor at 0 gives the same whatever the order: one more pod, one step
            view = self.views.get(node)
            if view is None:
                view = self.views[node] = [z.copy() for z in self.nrts[node] or ()]
            update_zones(view, request)
        return known

    def unreserve(self, node: str, pod_key: str) -> bool:
        """UnreserveNodeResources; whether the pod was assumed there."""
        known = self.assumed.get(node, {}).pop(pod_key, None) is not None
        if known:
            self._rebuild(node)
        return known

    def _rebuild(self, node: str) -> None:
        view = [z.copy() for z in self.nrts[node] or ()]
        for request in self.assumed[node].values():
            update_zones(view, request)
        self.views[node] = view

    def view(self, node: str) -> Sequence[Zone] | None:
        """The node's zones minus every assumed pod in every zone, shared: read it, never change it."""
        return self.views.get(node) or self.nrts.get(node)

    def zones(self, node: str) -> list[Zone] | None:
        """GetCachedNRTCopy: `view` as a copy the caller may change."""
        nrt = self.view(node)
        return None if nrt is None else [z.copy() for z in nrt]


def update_zones(zones: Sequence[Zone], request: Mapping[str, int]) -> None:
    """resourceStore.UpdateNRT for one pod: take its request from every zone that lists the resource."""
    for zone in zones:
        res = zone.resources
        for resource in res:
            quantity = request.get(resource)
            if quantity is not None:
                res[resource] = res[resource] - quantity if res[resource] >= quantity else 0
