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

    def reserve(self, node: str, pod_key: str, request: Mapping[str, int]) -> bool:
        """ReserveNodeResources; whether the pod was assumed there already. Nothing is kept for a
        node without an NRT object."""
        if self.nrts.get(node) is None:
            return False
        pods = self.assumed.setdefault(node, {})
        known = pod_key in pods
        pods[pod_key] = dict(request)
        return known

    def unreserve(self, node: str, pod_key: str) -> bool:
        """UnreserveNodeResources; whether the pod was assumed there."""
        return self.assumed.get(node, {}).pop(pod_key, None) is not None

    def zones(self, node: str) -> list[Zone] | None:
        """GetCachedNRTCopy: the node's zones minus every assumed pod in every zone."""
        nrt = self.nrts.get(node)
        if nrt is None:
            return None
        out = [z.copy() for z in nrt]
        for request in self.assumed.get(node, {}).values():
            update_zones(out, request)
        return out


def update_zones(zones: Sequence[Zone], request: Mapping[str, int]) -> None:
    """resourceStore.UpdateNRT for one pod: take its request from every zone that lists the resource."""
    for zone in zones:
        res = zone.resources
        for resource in res:
            quantity = request.get(resource)
            if quantity is not None:
                res[resource] = res[resource] - quantity if res[resource] >= quantity else 0
