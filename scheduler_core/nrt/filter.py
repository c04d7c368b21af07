"""NodeResourceTopologyMatch's Filter (scheduler-plugins `filter.go`): only nodes whose NRT states the
`single-numa-node` policy are checked (every other node passes unchecked, upstream #885); in container
scope each init container must fit one zone on its own and each app container one zone after the app
containers before it took theirs from the zone the kubelet would pick (the lowest NUMA id that fits);
in pod scope the pod's effective request must fit one zone.

Rejections carry the plugin's status text ("cannot align container", "cannot align init container",
"cannot align pod") and, as plain data, the container and the resource that decided it (upstream
only logs those: the resource it names depends on Go's map order, here the request's name order).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ..model.pods import BEST_EFFORT, SIDECAR
from .zones import POD, SINGLE_NUMA_NODE, PodView, TopologyManagerConf, Zone, is_host_level, is_numa_affine

UNSCHEDULABLE, ERROR = "Unschedulable", "Error"
#: what the scheduler's NodeInfo always lists as allocatable, whatever the node states
ALWAYS_ALLOCATABLE = frozenset(("cpu", "memory", "pods", "ephemeral-storage"))


@dataclass(frozen=True)
class FilterResult:
    """The Filter's answer: `code` None when the node passes; `checked` whether the plugin looked at
    the zones at all; `numa_mask` the zones the kubelet would pick, per container or for the pod."""

    code: str | None = None
    reason: str | None = None
    container: str | None = None
    resource: str | None = None
    checked: bool = False
    numa_mask: int = 0

    @property
    def passed(self) -> bool:
        return self.code is None

    def explain(self) -> str | None:
        """The reason with the detail upstream logs: which container, which resource."""
        if self.reason is None:
            return None
        detail = [x for x in (self.container and f"container {self.container}",
                              self.resource and f"resource {self.resource}") if x]
        return f"{self.reason}: {', '.join(detail)}" if detail else self.reason


def fit_zone(zones: Sequence[Zone], guaranteed: bool, requests: Mapping[str, int],
             allocatable: Collection[str]) -> tuple[int, str | None]:
    """resourcesAvailableInAnyNUMANodes: (the lowest zone id where every request fits, None), or
    (-1, the resource that left no zone), the requests checked in the order given."""
    mask = (1 << 64) - 1
    for resource, quantity in requests.items():
        if quantity == 0:
            continue
        if resource not in allocatable and resource not in ALWAYS_ALLOCATABLE:
            return -1, resource
        always = not guaranteed and is_numa_affine(resource)  # isResourceSetSuitable's QoS rule
        affine = False
        fits = 0
        for zone in zones:
            available = zone.resources.get(resource)
            if available is None:
                continue
            affine = True
            if always or available >= quantity:
                fits |= 1 << zone.numa_id
        if not affine and is_host_level(resource):
            continue
        mask &= fits
        if not mask:
            return -1, resource
    return (mask & -mask).bit_length() - 1, None


def take_from_zone(zones: Sequence[Zone], numa_id: int, guaranteed: bool, requests: Mapping[str, int]) -> str | None:
    """subtractResourcesFromNUMANodeList; the resource that would go negative (an internal error)."""
    for zone in zones:
        if zone.numa_id != numa_id:
            continue
        for resource, quantity in requests.items():
            if (not guaranteed and is_numa_affine(resource)) or quantity == 0 or resource not in zone.resources:
                continue
            left = zone.resources[resource] - quantity
            if left < 0:
                return resource
            zone.resources[resource] = left
    return None


def filter_pod(pod: PodView, zones: Sequence[Zone] | None, conf: TopologyManagerConf,
               allocatable: Collection[str]) -> FilterResult:
    """The Filter on one node: `zones` None when the node publishes no NRT object (it passes)."""
    if (pod.qos == BEST_EFFORT and not pod.non_native) or zones is None or conf.policy != SINGLE_NUMA_NODE:
        return FilterResult()
    guaranteed = pod.guaranteed
    if conf.scope == POD:
        numa_id, resource = fit_zone(zones, guaranteed, pod.effective, allocatable)
        if resource is not None:
            return FilterResult(UNSCHEDULABLE, "cannot align pod", resource=resource, checked=True)
        return FilterResult(checked=True, numa_mask=1 << numa_id)
    for c in pod.init:
        numa_id, resource = fit_zone(zones, guaranteed, c.requests, allocatable)
        if resource is not None:
            kind = "sidecar" if c.kind == SIDECAR else "init"
            return FilterResult(UNSCHEDULABLE, f"cannot align {kind} container", c.name, resource, True)
    # what one app container takes matters only to the next: a single one reads the zones as they are
    work = [z.copy() for z in zones] if len(pod.apps) > 1 else zones
    mask = 0
    for i, c in enumerate(pod.apps):
        numa_id, resource = fit_zone(work, guaranteed, c.requests, allocatable)
        if resource is not None:
            return FilterResult(UNSCHEDULABLE, "cannot align container", c.name, resource, True)
        if i + 1 < len(pod.apps):
            short = take_from_zone(work, numa_id, guaranteed, c.requests)
            if short is not None:
                return FilterResult(ERROR, "inconsistent resource accounting", c.name, short, True)
        mask |= 1 << numa_id
    return FilterResult(checked=True, numa_mask=mask)
