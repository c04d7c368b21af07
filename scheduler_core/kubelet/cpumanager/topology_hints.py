"""The CPU Manager's topology hints (ENGINE.md §2.6): one hint per NUMA mask whose free (and
reusable) CPUs cover the request, preferred when as narrow as the capacity allows; the container-
and pod-scope entry points with the regeneration of hints for CPUs already held."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...model.bitmask import bits_of as _bits
from ...model.cpuset import CPUSet
from ...model.kubelet_config import CPUOptions
from ...model.pods import Container, Pod, guaranteed_cpus, pod_guaranteed_cpus
from ...model.topology import Topology
from ..topologymanager.hint import TopologyHint
from .cpu_index import CPUIndex, as_mask, as_options, check_count, check_in_topology, cpu_index


def _generate_hints(td: CPUIndex, available: int, reusable: int, request: int, align_by_socket: bool
                    ) -> list[TopologyHint]:
    ids = td.numa_ids
    # Every reusable CPU must sit inside the mask (CPUs the topology does not know count as NUMA 0).
    reuse_numas = 0
    for cpu in _bits(reusable):
        reuse_numas |= 1 << td.cpu_numa.get(cpu, 0)
    need = request - reusable.bit_count()
    # A mask's available CPUs are the sum of its NUMA nodes' (they do not overlap) and only whether that
    # sum reaches `need` matters, so the hints depend on the free count per NUMA node capped at `need`.
    cap = max(need, 0)
    free = tuple(min((available & td.numa_mask[nid]).bit_count(), cap) for nid in ids)
    key = (td, free, reuse_numas, need, request, align_by_socket)
    hints = _HINTS.get(key)
    if hints is None:
        if len(_HINTS) >= _HINTS_LIMIT:
            _HINTS.clear()
        hints = _HINTS[key] = _hints_for(td, available, reuse_numas, need, request, align_by_socket)
    return list(hints)


# Hints by (CPU index, free CPUs per NUMA node capped at the need, NUMA nodes of the reusable CPUs, CPUs
# still needed, request, align by socket): a session asks the same question on every node in a like state.
_HINTS: dict[tuple[CPUIndex, tuple[int, ...], int, int, int, bool], tuple[TopologyHint, ...]] = {}
_HINTS_LIMIT = 4096


def _hints_for(td: CPUIndex, available: int, reuse_numas: int, need: int, request: int, align_by_socket: bool
               ) -> tuple[TopologyHint, ...]:
    # minAffinitySize from capacity: the fewest nodes whose largest capacities reach the request.
    caps = [td.numa_size[nid] for nid in td.numa_ids]
    min_size = len(caps)
    running = 0
    for k, cap in enumerate(sorted(caps, reverse=True), start=1):
        running += cap
        if running >= request:
            min_size = min(min_size, k)
            break

    combos = td.numa_combos()
    per_socket = td.align_numa_per_socket if align_by_socket else 0
    if not per_socket:
        return tuple(pair[size == min_size] for mask, cpus, size, pair in combos
                     if not reuse_numas & ~mask and (available & cpus).bit_count() >= need)
    min_sockets = -(-min_size // per_socket)
    hints = []
    for mask, cpus, size, pair in combos:
        if reuse_numas & ~mask or (available & cpus).bit_count() < need:
            continue
        preferred = size == min_size
        if not preferred:
            sockets = 0
            for nid in _bits(mask):
                sockets |= td.numa_sockets_mask.get(nid, 0)
            preferred = sockets.bit_count() == min_sockets
        hints.append(pair[preferred])
    return tuple(hints)


def cpu_topology_hints(topology: Topology, available: CPUSet | int | Iterable[int],
                       reusable: CPUSet | int | Iterable[int] | None, request: int,
                       align_by_socket: bool = False) -> list[TopologyHint]:
    """generateCPUTopologyHints: one hint per NUMA mask (IterateBitMasks order) whose available +
    reusable CPUs cover `request`; preferred when the mask is as narrow as the smallest set of NUMA
    nodes whose *capacity* fits the request (or socket-aligned with `align_by_socket`).
    Returns `[]` (never None) when nothing fits."""
    td = cpu_index(topology)
    avail = as_mask(available, "available CPUs")
    reuse = as_mask(reusable, "reusable CPUs")
    check_in_topology(td, avail, "the available set")
    n = check_count(request)
    return _generate_hints(td, avail, reuse, n, bool(align_by_socket))


def container_cpu_hints(topology: Topology, pod: Pod, container: Container,
                        default_cpuset: CPUSet | int | Iterable[int], reserved: CPUSet | int | Iterable[int] = 0,
                        assignments: Mapping[str, CPUSet] | None = None,
                        reusable: CPUSet | int | Iterable[int] | None = None,
                        options: CPUOptions | Mapping[str, object] | None = None,
                        ) -> dict[str, list[TopologyHint]] | None:
    """GetTopologyHints (container scope): None when the container has no exclusive CPUs; `{"cpu": []}`
    when its existing assignment has the wrong size; else `{"cpu": hints}` over the free pool
    (`default_cpuset − reserved`) with this pod's reusable CPUs. `assignments` maps the pod's container
    names to the CPUs they already hold."""
    td = cpu_index(topology)
    req = guaranteed_cpus(pod, container)
    if req == 0:
        return None
    by_socket = as_options(options).align_by_socket
    existing = (assignments or {}).get(container.name)
    if existing is not None:
        held = as_mask(existing, f"CPUs of container {container.name}")
        if held.bit_count() != req:
            return {"cpu": []}
        return {"cpu": _generate_hints(td, held, 0, req, by_socket)}
    free = as_mask(default_cpuset, "default cpuset") & ~as_mask(reserved, "reserved CPUs")
    return {"cpu": _generate_hints(td, free, as_mask(reusable, "reusable CPUs"), req, by_socket)}


def pod_cpu_hints(topology: Topology, pod: Pod, default_cpuset: CPUSet | int | Iterable[int],
                  reserved: CPUSet | int | Iterable[int] = 0, assignments: Mapping[str, CPUSet] | None = None,
                  reusable: CPUSet | int | Iterable[int] | None = None,
                  options: CPUOptions | Mapping[str, object] | None = None,
                  ) -> dict[str, list[TopologyHint]] | None:
    """GetPodTopologyHints (pod scope): the pod-level exclusive CPU count over the free pool, with
    CPUs already held by the pod's containers counted as reusable (ENGINE.md §2.6)."""
    td = cpu_index(topology)
    req = pod_guaranteed_cpus(pod)
    if req == 0:
        return None
    by_socket = as_options(options).align_by_socket
    assigned = 0
    for c in pod.all_containers():
        existing = (assignments or {}).get(c.name)
        if existing is None:
            continue
        held = as_mask(existing, f"CPUs of container {c.name}")
        if held.bit_count() != guaranteed_cpus(pod, c):
            return {"cpu": []}
        assigned |= held
    if assigned.bit_count() == req:
        return {"cpu": _generate_hints(td, assigned, 0, req, by_socket)}
    free = as_mask(default_cpuset, "default cpuset") & ~as_mask(reserved, "reserved CPUs")
    reuse = as_mask(reusable, "reusable CPUs") | assigned
    return {"cpu": _generate_hints(td, free, reuse, req, by_socket)}
