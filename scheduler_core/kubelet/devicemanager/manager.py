"""The kubelet Device Manager's allocation (the kubelet's `devicemanager/manager.go`, ENGINE.md §2.9).

Devices are `topology.Device` values of one resource. A device's NUMA nodes become an int mask
(bit i = NUMA node i); a device with no NUMA information (``numa`` None or ``()``) has mask 0.
Its hints are in `topology_hints`, the devices' order and masks in `devices`.

Public functions (pure: they never mutate their inputs):

- ``filter_by_affinity(devices, available, affinity)``: the corrected classification of
  PR #101893: nodes in the hint first, other real nodes next, the pseudo node -1 last.
- ``devices_to_allocate(...)``: devicesToAllocate (ENGINE.md §2.9) with reusable devices, the optional
  GetPreferredAllocation callback and the kubelet's error texts.

`DeviceManager` keeps a node's per-pod state (allocations, init-container reuse, ENGINE.md §2.5) on top of them
and of the hints.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ...errors import InsufficientResourcesError, RequestError, check_int
from ...model.bitmask import BitMaskError, mask_of
from ...model.node import Allocation
from ...model.pods import INIT, Container, Pod
from ...model.topology import Device, Topology
from ..topologymanager.hint import TopologyHint
from .devices import NO_TOPOLOGY_NODE, by_resource, has_topology_alignment, index_devices, known_ids, sorted_ids
from .topology_hints import container_device_hints, pod_device_hints, pod_device_requests

#: GetPreferredAllocation(available, must_include, size) -> preferred device ids (plugin callback).
PreferredAllocation = Callable[[frozenset[str], frozenset[str], int], Iterable[str]]


# -- filterByAffinity (ENGINE.md §2.9) ------------------------------------------------------------------------

def _affinity_mask(affinity: int | Iterable[int] | TopologyHint | None) -> int | None:
    if isinstance(affinity, TopologyHint):
        affinity = affinity.affinity
    if affinity is None:
        return None
    if isinstance(affinity, bool):
        raise RequestError(f"hint affinity must be a NUMA mask, not {affinity!r}")
    if isinstance(affinity, int):
        if affinity < 0 or affinity >> 64:
            raise RequestError(f"hint affinity mask {affinity} is outside 64 bits")
        return affinity
    try:
        return mask_of(affinity)
    except (BitMaskError, TypeError):
        raise RequestError(f"hint affinity {affinity!r} must be NUMA ids in 0..63") from None


def affinity_node_order(per_node: Mapping[int, Sequence[str] | set[str]], affinity: int) -> list[int]:
    """The fixed node order of filterByAffinity: nodes in the hint, then the other real nodes, then
    the pseudo node -1; inside a group by number of available devices, then by id (determinism)."""
    def key(node: int) -> tuple[int, int, int]:
        if node == NO_TOPOLOGY_NODE:
            group = 2
        elif (affinity >> node) & 1:
            group = 0
        else:
            group = 1
        return (group, len(per_node[node]), node)

    return sorted(per_node, key=key)


def filter_by_affinity(devices: Iterable[Device] | Mapping[str, Device], available: Iterable[str],
                       affinity: int | Iterable[int] | TopologyHint | None,
                       ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """Split `available` device ids into (aligned, unaligned, no_affinity) for the stored hint.

    `devices` are all registered devices of the resource; `affinity` is the hint's NUMA mask (int,
    NUMA id list or a TopologyHint; None = nil). With a nil hint or a resource without NUMA
    information everything is `no_affinity`. Each device is classified by the first node group that
    contains it in `affinity_node_order`, so a device on several NUMA nodes is aligned iff any of
    them is in the hint, whatever order the devices come in (the bug PR #101893 fixed is gone).
    """
    index = index_devices(devices)
    avail = known_ids(available, index, "available devices")
    mask = _affinity_mask(affinity)
    if mask is None or not has_topology_alignment(index.values()):
        return frozenset(), frozenset(), frozenset(avail)

    per_node: dict[int, set[str]] = {}
    for i in avail:
        nodes = index[i].numa
        for node in nodes if nodes else (NO_TOPOLOGY_NODE,):
            per_node.setdefault(node, set()).add(i)
    order = affinity_node_order(per_node, mask)

    aligned: set[str] = set()
    unaligned: set[str] = set()
    no_affinity: set[str] = set()
    for i in avail:
        for node in order:
            if i in per_node[node]:
                if node == NO_TOPOLOGY_NODE:
                    no_affinity.add(i)
                elif (mask >> node) & 1:
                    aligned.add(i)
                else:
                    unaligned.add(i)
                break
    return frozenset(aligned), frozenset(unaligned), frozenset(no_affinity)


# -- devicesToAllocate (ENGINE.md §2.9) -----------------------------------------------------------------------

def devices_to_allocate(resource: str, devices: Iterable[Device] | Mapping[str, Device], required: int, *,
                        in_use: Iterable[str] = (), reusable: Iterable[str] = (),
                        already_allocated: Iterable[str] | None = None,
                        affinity: int | Iterable[int] | TopologyHint | None = None,
                        preferred_allocation: PreferredAllocation | None = None,
                        registered: bool | None = None, pod_uid: str = "", container: str = "",
                        ) -> frozenset[str]:
    """The devices to hand to a container for `resource` (devicesToAllocate).

    `devices`: all registered devices of the resource; `in_use`: ids allocated to anyone (reusable
    ones included); `reusable`: ids freed by this pod's init containers, taken first;
    `already_allocated`: what this container already holds (None = nothing recorded);
    `affinity`: the stored topology hint; `preferred_allocation(available, must_include, size)`:
    the plugin's GetPreferredAllocation, when it implements it. Returns the allocated ids
    (reused ones included); empty when nothing is needed. Raises with the kubelet's messages.
    """
    required = check_int(required, f"request of {resource}")
    index = index_devices(devices)
    used = known_ids(in_use, index, f"devices in use for {resource}")
    reuse = known_ids(reusable, index, f"reusable devices for {resource}")
    held = None if already_allocated is None else known_ids(already_allocated, index, f"devices held for {resource}")
    healthy = _allocatable(resource, index, required, held, registered, pod_uid, container)
    if held is not None or required == 0:  # a container keeps what it holds
        return frozenset()
    picker = _Picker(required, preferred_allocation)
    if picker.take_from(reuse):
        return picker.picked()
    available = healthy - used - set(picker.taken)
    if len(available) < picker.needed:
        raise InsufficientResourcesError(f"requested number of devices unavailable for {resource}. "
                                         f"Requested: {picker.needed}, Available: {len(available)}")
    aligned, unaligned, no_affinity = filter_by_affinity(index, available, affinity)
    if picker.needed < len(aligned):
        if picker.take_from(picker.preferred(set(aligned)) & aligned) or picker.take_from(aligned):
            return picker.picked()
    else:
        if picker.take_from(aligned):
            return picker.picked()
        if (picker.take_from(picker.preferred(available) & available) or picker.take_from(unaligned)
                or picker.take_from(no_affinity)):
            return picker.picked()
    raise InsufficientResourcesError(f"unexpectedly allocated less resources than required. "
                                     f"Requested: {required}, Got: {required - picker.needed}")


def _allocatable(resource: str, index: Mapping[str, Device], required: int, held: set[str] | None,
                 registered: bool | None, pod_uid: str, container: str) -> set[str]:
    """The healthy devices of a registered resource, after the checks the kubelet makes before it
    takes any: an unchanged request for a container that holds devices, and those still healthy."""
    if held is not None and len(held) != required:
        raise RequestError(f'pod "{pod_uid}" container "{container}" changed request for resource '
                           f'"{resource}" from {len(held)} to {required}')
    if not (bool(index) if registered is None else registered):
        raise RequestError(f"cannot allocate unregistered device {resource}")
    healthy = {i for i, d in index.items() if d.healthy}
    if not healthy:
        raise InsufficientResourcesError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
    if held is not None and not held <= healthy:
        raise InsufficientResourcesError(
            f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}")
    return healthy


class _Picker:
    """devicesToAllocate's taking: devices in natural id order, pool after pool, until `required`
    are taken; the plugin's preference is asked with what is taken so far."""

    def __init__(self, required: int, preferred_allocation: PreferredAllocation | None) -> None:
        self.required = self.needed = required
        self.preferred_allocation = preferred_allocation
        self.taken: list[str] = []

    def take_from(self, pool: Iterable[str]) -> bool:
        """Take from `pool` what is not taken yet; whether the request is complete."""
        for i in sorted_ids(set(pool) - set(self.taken)):
            self.taken.append(i)
            self.needed -= 1
            if self.needed == 0:
                return True
        return False

    def preferred(self, pool: set[str]) -> set[str]:
        if self.preferred_allocation is None:
            return set()
        taken = frozenset(self.taken)
        return set(self.preferred_allocation(frozenset(pool | taken), taken, self.required))

    def picked(self) -> frozenset[str]:
        return frozenset(self.taken)


# -- per-node state ----------------------------------------------------------------------------------

@dataclass
class DeviceManager:
    """A node's Device Manager: registered devices, who holds what, and init-container reuse (ENGINE.md §2.5).

    `plugins_with_preference` maps a resource to its plugin's GetPreferredAllocation callback.
    """

    #: an allocation failure names no resource (the manager serves several)
    resource: ClassVar[str | None] = None

    numa_nodes: tuple[int, ...]
    devices: tuple[Device, ...]
    plugins_with_preference: dict[str, PreferredAllocation] = field(default_factory=dict)
    #: (pod uid, container, resource) -> device ids
    assignments: dict[tuple[str, str, str], frozenset[str]] = field(default_factory=dict)
    #: pod uid -> resource -> reusable ids (kept for one pod at a time, like upstream)
    reuse: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.numa_nodes = tuple(self.numa_nodes)
        self.devices = tuple(self.devices)
        self._registry = by_resource(self.devices)

    @classmethod
    def for_topology(cls, topology: Topology) -> DeviceManager:
        return cls(tuple(topology.numa_ids), tuple(topology.devices))

    @property
    def resources(self) -> tuple[str, ...]:
        return tuple(sorted(self._registry))

    def in_use(self, resource: str) -> set[str]:
        return {i for (_, _, r), ids in self.assignments.items() if r == resource for i in ids}

    def _held(self, pod_uid: str, container: str | None, resource: str) -> set[str]:
        return {i for (p, c, r), ids in self.assignments.items()
                if p == pod_uid and r == resource and (container is None or c == container) for i in ids}

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint] | None]:
        requests = {r: n for r, n in container.device_requests().items() if r in self._registry}
        if not requests:
            return {}  # what the hints of no request are, without walking the registry again
        allocated = {r: self._held(pod.uid, container.name, r) for r in requests}
        in_use = {r: self.in_use(r) for r in requests}
        reusable = self.reuse.get(pod.uid, {})
        return container_device_hints(self.numa_nodes, self.devices, requests, in_use, allocated, reusable)

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint] | None]:
        requests = {r: n for r, n in pod_device_requests(pod, self._registry).items() if n > 0}
        if not requests:
            return {}
        allocated = {r: self._held(pod.uid, None, r) for r in requests}
        in_use = {r: self.in_use(r) for r in requests}
        return pod_device_hints(self.numa_nodes, self.devices, requests, in_use, allocated)

    def allocate(self, pod: Pod, container: Container, affinity: int | TopologyHint | None = None) -> Allocation:
        """Allocate every device resource of `container` with the stored hint and update the reuse
        state; returns the devices the container holds (ids sorted, resources without any left out)."""
        for uid in [u for u in self.reuse if u != pod.uid]:
            del self.reuse[uid]
        pod_reuse = self.reuse.setdefault(pod.uid, {})
        out: dict[str, tuple[str, ...]] = {}
        for resource, required in sorted(container.device_requests().items()):
            if resource not in self._registry:
                continue
            key = (pod.uid, container.name, resource)
            held = self.assignments.get(key)
            got = devices_to_allocate(
                resource, self._registry[resource], required, in_use=self.in_use(resource),
                reusable=pod_reuse.get(resource, ()), already_allocated=held, affinity=affinity,
                preferred_allocation=self.plugins_with_preference.get(resource),
                pod_uid=pod.uid, container=container.name)
            if got:
                self.assignments[key] = got
            ids = self.assignments.get(key)
            if ids:
                out[resource] = tuple(sorted(ids))
        mine = {r: ids for (p, c, r), ids in self.assignments.items() if p == pod.uid and c == container.name}
        if container.kind == INIT:
            for r, ids in mine.items():
                pod_reuse.setdefault(r, set()).update(ids)
        else:
            for r, ids in mine.items():
                pod_reuse.get(r, set()).difference_update(ids)
        return Allocation(pod.uid, container.name, devices=out)

    def remove_pod(self, pod_uid: str) -> None:
        for key in [k for k in self.assignments if k[0] == pod_uid]:
            del self.assignments[key]
        self.reuse.pop(pod_uid, None)
