"""Stranded capacity: what is free by count but where no pod of a given shape fits NUMA-aligned.

A node is summarised once (`node_free`, a small hashable value: equal nodes share it, and a caller caches it per
node generation) as, per NUMA node, the CPUs the static CPU Manager may still hand out, those of them in whole
free cores, the memory the Memory Manager may still pin and the healthy free devices local to it. A pod of a
`Shape` *fits aligned* on a NUMA node when that node alone can give it everything it pins:

- its exclusive CPUs (a Guaranteed pod's whole CPUs; with `full-pcpus-only` they must be whole free cores, and a
  count that is not a multiple of the threads per core fits nowhere: the kubelet refuses it with SMTAlignmentError);
- its memory, only on nodes whose Memory Manager policy is `Static` (elsewhere memory is not pinned to NUMA nodes);
- its devices, counted on the NUMA node they report; a device that reports no NUMA node constrains no alignment
  (the kubelet's device hints then have no preference), so it counts toward a fit on any NUMA node of its node,
  and is never stranded.

`stranded(summaries, shape)` then counts, over nodes with the static CPU Manager (the only ones where CPUs are
pinned at all), the free CPUs and the free devices of the shape's resources that sit on NUMA nodes where not even
one such pod fits aligned, and how many pods of the shape fit aligned, each NUMA node counted on its own
(`aligned_pods`: an upper bound of what single-NUMA placement can add, not a session's headroom)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from ..errors import RequestError
from ..model.node import Node
from .headroom import Shape


@dataclass(frozen=True, slots=True)
class NumaFree:
    """One NUMA node's free resources: CPUs, CPUs in whole free cores, pinnable memory bytes, devices."""

    numa: int
    cpus: int
    core_cpus: int
    memory: int
    devices: tuple[tuple[str, int], ...] = ()

    def device_count(self, resource: str) -> int:
        return _count(self.devices, resource)

    def __reduce__(self) -> tuple[type[NumaFree], tuple[int, int, int, int, tuple[tuple[str, int], ...]]]:
        """Pickled as its fields: loading thousands calls the constructor, not the dataclass's slow __setstate__."""
        return NumaFree, (self.numa, self.cpus, self.core_cpus, self.memory, self.devices)


@dataclass(frozen=True, slots=True)
class NodeFree:
    """A node's free resources per NUMA node, and the kubelet settings that decide what fits on one. Its hash is
    computed once: summaries are counted in dicts, thousands at a time."""

    pinning: bool  # the static CPU Manager: CPUs are pinned, so alignment is a question at all
    full_pcpus_only: bool
    threads_per_core: int
    memory_pinned: bool  # the Memory Manager's Static policy
    numa: tuple[NumaFree, ...]
    devices: tuple[tuple[str, int], ...] = ()  # free healthy devices of the node, per resource
    floating: tuple[tuple[str, int], ...] = ()  # of those, the ones reporting no NUMA node
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.pinning, self.full_pcpus_only, self.threads_per_core,
                                                self.memory_pinned, self.numa, self.devices, self.floating)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[NodeFree], tuple[object, ...]]:
        """Pickled by its fields, so a process that loads it computes the hash again (str hashes differ between
        processes): the web keeps summaries in its shared cache."""
        return NodeFree, (self.pinning, self.full_pcpus_only, self.threads_per_core, self.memory_pinned, self.numa,
                          self.devices, self.floating)

    @property
    def free_cpus(self) -> int:
        return sum(n.cpus for n in self.numa)


class StrandedFigures(TypedDict):
    cpus: int
    devices: dict[str, int]
    aligned_pods: int


def node_free(node: Node) -> NodeFree:
    """The summary `stranded` reads, from the node's current free state."""
    topo, kubelet = node.topology, node.kubelet
    free = node.free_cpus
    whole = 0  # free CPUs of cores none of whose threads is held or reserved
    for mask in topo.core_cpus.values():
        if mask & free == mask:
            whole |= mask
    local: dict[int, dict[str, int]] = {n: {} for n in topo.numa_ids}
    total: dict[str, int] = {}
    floating: dict[str, int] = {}
    for dev in topo.devices:
        if not dev.healthy or (dev.resource, dev.id) in node.used_devices:
            continue
        total[dev.resource] = total.get(dev.resource, 0) + 1
        if not dev.numa:
            floating[dev.resource] = floating.get(dev.resource, 0) + 1
        for nid in dev.numa or ():
            counts = local[nid]
            counts[dev.resource] = counts.get(dev.resource, 0) + 1
    numa = tuple(
        NumaFree(nid, (m & free).bit_count(), (m & whole).bit_count(),
                 max(node.memory_free(nid), 0) if kubelet.static_memory else 0,
                 tuple(sorted(local[nid].items())))
        for nid, m in sorted(topo.numa_cpus.items()))
    return NodeFree(kubelet.static_cpus, kubelet.cpu_manager_options.full_pcpus_only, topo.threads_per_core,
                    kubelet.static_memory, numa, tuple(sorted(total.items())), tuple(sorted(floating.items())))


def exclusive_cpus(shape: Shape) -> int:
    """The CPUs a pod of `shape` pins; a shape asking for a fraction of a CPU pins none, so it has no alignment."""
    whole, part = divmod(shape.cpu_milli, 1000)
    if part:
        raise RequestError(f"cpu: a shape measured for stranded capacity pins whole CPUs, not {shape.cpu_milli}m")
    return whole


def _count(pairs: tuple[tuple[str, int], ...], resource: str) -> int:
    return next((n for name, n in pairs if name == resource), 0)


def aligned_pods(numa: NumaFree, node: NodeFree, cpus: int, shape: Shape) -> int:
    """How many pods of `shape` (pinning `cpus`) this NUMA node alone can take aligned (its own devices and the
    node's devices without NUMA affinity counted)."""
    if node.full_pcpus_only:
        if cpus % node.threads_per_core:
            return 0
        fit = numa.core_cpus // cpus
    else:
        fit = numa.cpus // cpus
    if node.memory_pinned and shape.memory:
        fit = min(fit, numa.memory // shape.memory)
    for resource, count in shape.devices:
        fit = min(fit, (numa.device_count(resource) + _count(node.floating, resource)) // count)
    return fit


def stranded(summaries: Mapping[NodeFree, int] | Iterable[NodeFree], shape: Shape) -> StrandedFigures:
    """Free CPUs and devices (of the shape's resources) on NUMA nodes where no pod of `shape` fits aligned, and
    the aligned pods that do fit; `summaries` may map each distinct summary to how many nodes share it."""
    weighted = summaries.items() if isinstance(summaries, Mapping) else ((s, 1) for s in summaries)
    cpus = exclusive_cpus(shape)
    lost_cpus = fitting = 0
    lost_devices = {resource: 0 for resource, _n in shape.devices}
    for node, weight in weighted:
        if not node.pinning:
            continue
        fits = 0
        for numa in node.numa:
            fit = aligned_pods(numa, node, cpus, shape)
            if fit:
                fits += fit
                continue
            lost_cpus += numa.cpus * weight
            for resource in lost_devices:
                lost_devices[resource] += numa.device_count(resource) * weight
        for resource, count in shape.devices:  # a device local to two NUMA nodes, or none, serves one pod
            fits = min(fits, _count(node.devices, resource) // count)
        fitting += fits * weight
    return {"cpus": lost_cpus, "devices": lost_devices, "aligned_pods": fitting}
