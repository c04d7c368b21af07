"""The registered devices of a resource as both halves of the Device Manager read them (ENGINE.md §2.9):
natural id order, a device's NUMA mask, and id sets checked against the registry.

Where upstream iterates a Go set (which equally valid device is taken), the Device Manager takes devices in
natural id order (``Dev2`` before ``Dev10``), so results are reproducible.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ...errors import RequestError
from ...model.bitmask import BitMaskError, mask_of
from ...model.topology import Device

#: The pseudo NUMA node of devices that report no NUMA information (upstream `nodeWithoutTopology`).
NO_TOPOLOGY_NODE = -1

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


def index_devices(devices: Iterable[Device] | Mapping[str, Device]) -> dict[str, Device]:
    """Devices by id; a list naming one id twice is refused."""
    if isinstance(devices, Mapping):
        return dict(devices)
    out: dict[str, Device] = {}
    for d in devices:
        if d.id in out:
            raise RequestError(f"device {d.id!r} is listed twice")
        out[d.id] = d
    return out


def known_ids(ids: Iterable[str] | None, index: Mapping[str, Device], what: str) -> set[str]:
    """`ids` as a set, each one a device of `index` (the error names `what`)."""
    out = set(ids or ())
    unknown = sorted_ids(i for i in out if i not in index)
    if unknown:
        raise RequestError(f"unknown device {unknown[0]!r} in {what}")
    return out


def by_resource(devices: Iterable[Device]) -> dict[str, dict[str, Device]]:
    """Devices by resource, then by id; an id listed twice for one resource is refused."""
    out: dict[str, dict[str, Device]] = {}
    for d in devices:
        per = out.setdefault(d.resource, {})
        if d.id in per:
            raise RequestError(f"device {d.id!r} of {d.resource} is listed twice")
        per[d.id] = d
    return out
