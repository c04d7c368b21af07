"""The Device Manager's NUMA hints (the kubelet's `devicemanager/topology_hints.go`, ENGINE.md §2.9).

Public functions (pure: they never mutate their inputs):

- ``device_topology_hints(numa_nodes, devices, available, reusable, request)``: the classic
  generateDeviceTopologyHints, enumerating every machine NUMA node.
- ``container_device_hints(...)`` / ``pod_device_hints(...)``: the container- and pod-scope
  entry points, returning per resource ``None`` (no preference), ``[]`` (impossible) or hints.
- ``pod_device_requests(pod, registered)``: getPodDeviceRequest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...errors import RequestError, check_int
from ...model.bitmask import BitMaskError, iterate_masks, mask_of
from ...model.pods import Pod, pod_device_request
from ...model.topology import Device
from ..topologymanager.hint import TopologyHint
from .devices import by_resource, device_mask, has_topology_alignment, index_devices, known_ids


def device_topology_hints(numa_nodes: Sequence[int], devices: Iterable[Device] | Mapping[str, Device],
                          available: Iterable[str], reusable: Iterable[str], request: int) -> list[TopologyHint]:
    """generateDeviceTopologyHints (classic): one hint per NUMA mask whose available + reusable
    devices cover `request`; preferred iff the mask is as narrow as the narrowest mask that could hold
    `request` devices counting *all* registered devices (capacity, not free state; ENGINE.md §2.9).

    `devices` are all registered devices of the resource (healthy or not), `available`/`reusable`
    their ids. Masks are generated in IterateBitMasks order over `numa_nodes`. A request larger than
    the machine yields `[]` (the provider's "impossible"), as in the kubelet.
    """
    request = check_int(request, "device request")
    index = index_devices(devices)
    avail = known_ids(available, index, "available devices")
    reuse = known_ids(reusable, index, "reusable devices")
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
    registry = by_resource(devices)
    flat: set[str] = set()
    if in_use is not None and not isinstance(in_use, Mapping):
        # one flat id set for every resource: check it against all registered ids once
        every = {i: d for per in registry.values() for i, d in per.items()}
        flat = known_ids(in_use, every, "devices in use")
    out: dict[str, list[TopologyHint] | None] = {}
    for resource in sorted(requests):
        request = check_int(requests[resource], f"request of {resource}")
        per = registry.get(resource)
        if per is None:
            continue  # not a device-plugin resource
        if not has_topology_alignment(per.values()):
            out[resource] = None
            continue
        mine = known_ids(_ids_for(allocated, resource), per, f"devices allocated for {resource}")
        if mine:
            out[resource] = (device_topology_hints(numa_nodes, per, mine, (), request)
                             if len(mine) == request else [])
            continue
        if isinstance(in_use, Mapping):
            used = known_ids(_ids_for(in_use, resource), per, f"devices in use for {resource}")
        else:
            used = flat & per.keys()
        free = {i for i, d in per.items() if d.healthy} - used
        reuse = set() if pod_scope else known_ids(_ids_for(reusable, resource), per, f"reusable {resource}")
        if len(free | reuse) < request:
            out[resource] = []
            continue
        out[resource] = device_topology_hints(numa_nodes, per, free, reuse, request)
    return out


def pod_device_requests(pod: Pod, registered: Iterable[str]) -> dict[str, int]:
    """getPodDeviceRequest: pod-level device count of every registered resource the pod asks for."""
    wanted = {r for c in pod.all_containers() for r, n in c.limits.items() if n > 0}
    return {r: pod_device_request(pod, r) for r in sorted(wanted & set(registered))}
