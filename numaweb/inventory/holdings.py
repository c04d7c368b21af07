"""Which NUMA nodes a pod's holding sits on: its CPUs, the memory it holds per NUMA node and its devices'
NUMA affinity. One rule for the node page's "who holds what" and the pod search, so both say the same."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler_core.topology import Topology


def numa_nodes(topology: Topology, cpus: int, memory: Iterable[Mapping] = (), devices: Iterable[Mapping] = ()
               ) -> list[int]:
    """Sorted NUMA ids holding any of `cpus` (a mask), any memory of the `memory` dicts ({numa: {resource:
    bytes}}) or any device of the `devices` dicts ({resource: [ids]})."""
    held = {n for n, mask in topology.numa_cpus.items() if mask & cpus}
    for per_numa in memory:
        held.update(int(n) for n, res in (per_numa or {}).items() if any(res.values()))
    wanted = {(resource, d) for per_resource in devices for resource, ids in (per_resource or {}).items()
              for d in ids}
    if wanted:
        for device in topology.devices:
            if (device.resource, device.id) in wanted:
                held.update(device.numa or ())
    return sorted(held)


def memory_per_numa(memory: Iterable[Mapping]) -> dict[str, dict[str, int]]:
    """The memory dicts of a pod's containers summed per NUMA node and resource."""
    out: dict[str, dict[str, int]] = {}
    for per_numa in memory:
        for n, res in (per_numa or {}).items():
            slot = out.setdefault(str(n), {})
            for resource, amount in res.items():
                slot[resource] = slot.get(resource, 0) + int(amount)
    return dict(sorted(out.items(), key=lambda item: int(item[0])))


def devices_of(devices: Iterable[Mapping]) -> dict[str, list[str]]:
    """The device dicts of a pod's containers merged per resource."""
    out: dict[str, list[str]] = {}
    for per_resource in devices:
        for resource, ids in (per_resource or {}).items():
            out.setdefault(resource, []).extend(ids)
    return {resource: sorted(ids) for resource, ids in sorted(out.items())}
