"""The kubelet Device Manager as a NUMA hint provider and allocator (ENGINE.md §2.9).

Devices are `topology.Device` values of one resource. A device's NUMA nodes become an int mask
(bit i = NUMA node i); a device with no NUMA information (``numa`` None or ``()``) has mask 0.

Public functions (pure: they never mutate their inputs):

- ``device_topology_hints(numa_nodes, devices, available, reusable, request)``: the classic
  generateDeviceTopologyHints, enumerating every machine NUMA node (ENGINE.md §2.9).
- ``container_device_hints(...)`` / ``pod_device_hints(...)``: the container- and pod-scope
  entry points, returning per resource ``None`` (no preference), ``[]`` (impossible) or hints (ENGINE.md §2.9).
- ``filter_by_affinity(devices, available, affinity)``: the corrected classification of
  PR #101893: nodes in the hint first, other real nodes next, the pseudo node -1 last.
- ``devices_to_allocate(...)``: devicesToAllocate (ENGINE.md §2.9) with reusable devices, the optional
  GetPreferredAllocation callback and the kubelet's error texts.

`DeviceManager` keeps a node's per-pod state (allocations, init-container reuse, ENGINE.md §2.5) on top of them.

Where upstream iterates a Go set (which equally valid device is taken), this module takes devices in
natural id order (``Dev2`` before ``Dev10``), so results are reproducible.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...errors import InsufficientResourcesError, RequestError, check_int
from ...model.bitmask import BitMaskError, iterate_masks, mask_of
from ...model.node import Allocation
from ...model.pods import INIT, Container, Pod, pod_device_request
from ...model.topology import Device, Topology
from ..topologymanager.hint import TopologyHint

#: The pseudo NUMA node of devices that report no NUMA information (upstream `nodeWithoutTopology`).
NO_TOPOLOGY_NODE = -1

#: GetPreferredAllocation(available, must_include, size) -> preferred device ids (plugin callback).
PreferredAllocation = Callable[[frozenset[str], frozenset[str], int], Iterable[str]]

_DIGITS = re.compile(r"(\d+)")


def device_sort_key(device_id: str) -> tuple[tuple[int, int, str], ...]:
    """Natural order of device ids (`Dev2` < `Dev10`), used wherever upstream picks from a Go set."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(device_id) if part)


def sorted_ids(ids: Iterable[str]) -> list[str]:
    return sorted(ids, key=device_sort_key)


def device_mask(device: Device) -> int:
    """NUMA mask of a device; 0 when it reports no NUMA nodes."""
    if not device.numa:
        return 0
    try:
        return mask_of(device.numa)
    except BitMaskError:
        raise RequestError(f"device {device.id!r} has an invalid NUMA node list {device.numa!r}") from None


def has_topology_alignment(devices: Iterable[Device]) -> bool:
    """deviceHasTopologyAlignment: some device of the resource reports at least one NUMA node."""
    return any(d.numa for d in devices)


def _check_request(request: object, what: str) -> int:
    return check_int(request, what)


def _index(devices: Iterable[Device] | Mapping[str, Device]) -> dict[str, Device]:
    if isinstance(devices, Mapping):
        return dict(devices)
    out: dict[str, Device] = {}
    for d in devices:
        if d.id in out:
            raise RequestError(f"device {d.id!r} is listed twice")
        out[d.id] = d
    return out


def _known(ids: Iterable[str] | None, index: Mapping[str, Device], what: str) -> set[str]:
    out = set(ids or ())
    unknown = sorted_ids(i for i in out if i not in index)
    if unknown:
        raise RequestError(f"unknown device {unknown[0]!r} in {what}")
    return out


# -- hints (ENGINE.md §2.9) -------------------------------------------------------------------------------------

def device_topology_hints(numa_nodes: Sequence[int], devices: Iterable[Device] | Mapping[str, Device],
                          available: Iterable[str], reusable: Iterable[str], request: int) -> list[TopologyHint]:
    """generateDeviceTopologyHints (classic): one hint per NUMA mask whose available + reusable
    devices cover `request`; preferred iff the mask is as narrow as the narrowest mask that could hold
    `request` devices counting *all* registered devices (capacity, not free state; ENGINE.md §2.9).

    `devices` are all registered devices of the resource (healthy or not), `available`/`reusable`
    their ids. Masks are generated in IterateBitMasks order over `numa_nodes`. A request larger than
    the machine yields `[]` (the provider's "impossible"), as in the kubelet.
    """
    request = _check_request(request, "device request")
    index = _index(devices)
    avail = _known(available, index, "available devices")
    reuse = _known(reusable, index, "reusable devices")
    try:
        mask_of(numa_nodes)
    except BitMaskError:
        raise RequestError(f"NUMA nodes {list(numa_nodes)!r} must be ids in 0..63") from None

    # Count devices per distinct NUMA mask so each candidate mask costs O(distinct masks).
    all_counts: dict[int, int] = {}
    for d in index.values():
        m = device_mask(d)
        if m:
            all_counts[m] = all_counts.get(m, 0) + 1
    avail_counts: dict[int, int] = {}
    for i in avail:
        m = device_mask(index[i])
        if m:
            avail_counts[m] = avail_counts.get(m, 0) + 1
    # A reusable device with no Topology (None) is ignored; one whose Topology lists no nodes (())
    # rejects every mask (upstream quirk, ENGINE.md §2.9).
    reuse_masks: list[int] = []
    for i in reuse:
        d = index[i]
        if d.numa is None:
            continue
        reuse_masks.append(device_mask(d))

    key = (tuple(numa_nodes), frozenset(all_counts.items()), frozenset(avail_counts.items()),
           tuple(sorted(reuse_masks)), request)
    hints = _HINTS.get(key)
    if hints is None:
        if len(_HINTS) >= _HINTS_LIMIT:
            _HINTS.clear()
        hints = _HINTS[key] = _generate(numa_nodes, all_counts, avail_counts, reuse_masks, request)
    return list(hints)


# Hints by (NUMA nodes, devices per NUMA mask: all / available, reusable masks, request): the hints
# depend on nothing else, and a session asks the same question on every node of a shape.
_HINTS: dict[tuple[Any, ...], tuple[TopologyHint, ...]] = {}
_HINTS_LIMIT = 4096


def _generate(numa_nodes: Sequence[int], all_counts: dict[int, int], avail_counts: dict[int, int],
              reuse_masks: list[int], request: int) -> tuple[TopologyHint, ...]:
    min_affinity = len(numa_nodes)
    found: list[int] = []
    for mask in iterate_masks(numa_nodes):
        in_mask = sum(n for m, n in all_counts.items() if m & mask)
        size = mask.bit_count()
        if in_mask >= request and size < min_affinity:
            min_affinity = size
        matching = 0
        for m in reuse_masks:
            if not m & mask:
                break
            matching += 1
        else:
            matching += sum(n for m, n in avail_counts.items() if m & mask)
            if matching >= request:
                found.append(mask)
    return tuple(TopologyHint(mask, mask.bit_count() == min_affinity) for mask in found)


def container_device_hints(numa_nodes: Sequence[int], devices: Iterable[Device], requests: Mapping[str, int],
                           in_use: Iterable[str] | Mapping[str, Iterable[str]] = (),
                           allocated: Mapping[str, Iterable[str]] | None = None,
                           reusable: Mapping[str, Iterable[str]] | None = None,
                           ) -> dict[str, list[TopologyHint] | None]:
    """GetTopologyHints of the Device Manager for one container (ENGINE.md §2.9).

    `devices`: every registered device (any resource); `requests`: the container's device limits;
    `in_use`: ids allocated to anyone (a set for one resource namespace, or resource -> ids);
    `allocated`: resource -> ids already held by this container; `reusable`: resource -> ids
    freed by the pod's init containers. Resources with no registered device are ignored.
    Per resource: None (no NUMA info), [] (cannot be satisfied) or hints.
    """
    return _scope_hints(numa_nodes, devices, requests, in_use, allocated, reusable, pod_scope=False)


def pod_device_hints(numa_nodes: Sequence[int], devices: Iterable[Device], requests: Mapping[str, int],
                     in_use: Iterable[str] | Mapping[str, Iterable[str]] = (),
                     allocated: Mapping[str, Iterable[str]] | None = None,
                     ) -> dict[str, list[TopologyHint] | None]:
    """GetPodTopologyHints: like `container_device_hints` with the pod-level requests
    (`pod_device_requests`), `allocated` = devices held by any container of the pod, no reuse."""
    return _scope_hints(numa_nodes, devices, requests, in_use, allocated, None, pod_scope=True)


def _by_resource(devices: Iterable[Device]) -> dict[str, dict[str, Device]]:
    out: dict[str, dict[str, Device]] = {}
    for d in devices:
        per = out.setdefault(d.resource, {})
        if d.id in per:
            raise RequestError(f"device {d.id!r} of {d.resource} is listed twice")
        per[d.id] = d
    return out


def _ids_for(values: Iterable[str] | Mapping[str, Iterable[str]] | None, resource: str) -> set[str]:
    if values is None:
        return set()
    if isinstance(values, Mapping):
        return set(values.get(resource, ()))
    return set(values)


def _scope_hints(numa_nodes: Sequence[int], devices: Iterable[Device], requests: Mapping[str, int],
                 in_use: Iterable[str] | Mapping[str, Iterable[str]], allocated: Mapping[str, Iterable[str]] | None,
                 reusable: Mapping[str, Iterable[str]] | None, pod_scope: bool,
                 ) -> dict[str, list[TopologyHint] | None]:
    registry = _by_resource(devices)
    flat: set[str] = set()
    if in_use is not None and not isinstance(in_use, Mapping):
        # one flat id set for every resource: check it against all registered ids once
        every = {i: d for per in registry.values() for i, d in per.items()}
        flat = _known(in_use, every, "devices in use")
    out: dict[str, list[TopologyHint] | None] = {}
    for resource in sorted(requests):
        request = _check_request(requests[resource], f"request of {resource}")
        per = registry.get(resource)
        if per is None:
            continue  # not a device-plugin resource
        if not has_topology_alignment(per.values()):
            out[resource] = None
            continue
        mine = _known(_ids_for(allocated, resource), per, f"devices allocated for {resource}")
        if mine:
            out[resource] = (device_topology_hints(numa_nodes, per, mine, (), request)
                             if len(mine) == request else [])
            continue
        if isinstance(in_use, Mapping):
            used = _known(_ids_for(in_use, resource), per, f"devices in use for {resource}")
        else:
            used = flat & per.keys()
        free = {i for i, d in per.items() if d.healthy} - used
        reuse = set() if pod_scope else _known(_ids_for(reusable, resource), per, f"reusable {resource}")
        if len(free | reuse) < request:
            out[resource] = []
            continue
        out[resource] = device_topology_hints(numa_nodes, per, free, reuse, request)
    return out


def pod_device_requests(pod: Pod, registered: Iterable[str]) -> dict[str, int]:
    """getPodDeviceRequest: pod-level device count of every registered resource the pod asks for."""
    wanted = {r for c in pod.all_containers() for r, n in c.limits.items() if n > 0}
    return {r: pod_device_request(pod, r) for r in sorted(wanted & set(registered))}


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
    index = _index(devices)
    avail = _known(available, index, "available devices")
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
    required = _check_request(required, f"request of {resource}")
    index = _index(devices)
    used = _known(in_use, index, f"devices in use for {resource}")
    reuse = _known(reusable, index, f"reusable devices for {resource}")
    held = None if already_allocated is None else _known(already_allocated, index, f"devices held for {resource}")
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
        self._registry = _by_resource(self.devices)

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
        allocated = {r: self._held(pod.uid, container.name, r) for r in requests}
        in_use = {r: self.in_use(r) for r in requests}
        reusable = self.reuse.get(pod.uid, {})
        return container_device_hints(self.numa_nodes, self.devices, requests, in_use, allocated, reusable)

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint] | None]:
        requests = {r: n for r, n in pod_device_requests(pod, self._registry).items() if n > 0}
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
