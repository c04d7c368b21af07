"""The kubelet CPU Manager (upstream `cpu_manager.go`; ENGINE.md §2.6) under the static policy: reserved CPUs,
SMT alignment (`full-pcpus-only`), `allocate_cpus` and the `CPUManager` hint provider the admission asks. Its
hints are `topology_hints`, its CPU choice `cpu_assignment`; both are imported here for its own use. The
static policy's state machine over its checkpoint is `policy_static` (upstream `policy_static.go`).

- `reserved_cpu_set(...)`, `reserved_physical_cpus(...)`, `check_smt_alignment(...)`,
  `validate_static_options(topology, options)`;
- `allocate_cpus(topology, n, numa_affinity, default_cpuset, reserved, reusable, options)`,
  `allocate_container(...)` (Allocate for a new container), `update_cpus_to_reuse(...)` (ENGINE.md §2.5);
- `CPUManager`: one node's CPU state during one admission.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...errors import InsufficientResourcesError, PolicyError
from ...model.bitmask import bits_of as _bits
from ...model.cpuset import CPUSet
from ...model.kubelet_config import CPUOptions
from ...model.node import Allocation, Node
from ...model.pods import INIT, Container, Pod, guaranteed_cpus
from ...model.topology import Topology
from ..topologymanager.hint import TopologyHint
from ..topologymanager.scope import AdmissionError
from .cpu_assignment import take_by_topology
from .cpu_index import CPUIndex, as_mask, as_options, check_count, check_in_topology, cpu_index, numa_mask_of
from .topology_hints import container_cpu_hints, cpu_topology_hints, pod_cpu_hints

__all__ = [
    "CPUManager", "SMTAlignmentError", "allocate_container", "allocate_cpus", "check_smt_alignment",
    "container_cpu_hints", "cpu_topology_hints", "pod_cpu_hints", "reserved_cpu_set", "reserved_physical_cpus",
    "take_by_topology", "update_cpus_to_reuse", "validate_static_options",
]


class SMTAlignmentError(AdmissionError):
    """`full-pcpus-only` cannot be honoured; `reason` is the kubelet's admission reason string (an
    admission reports it as is, naming the container)."""

    reason = "SMTAlignmentError"


def reserved_cpu_set(topology: Topology, reserved_cpus: CPUSet | int | Iterable[int] | None = None,
                     reserved_cpu_milli: int = 0,
                     options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """The static policy's reserved CPUs: the explicit `reservedSystemCPUs` list when given, else
    `ceil(milli/1000)` CPUs chosen by `take_by_topology` from all CPUs."""
    td = cpu_index(topology)
    explicit = as_mask(reserved_cpus, "reserved CPUs")
    if explicit:
        check_in_topology(td, explicit, "reservedSystemCPUs")
        return CPUSet(explicit)
    milli = check_count(reserved_cpu_milli, "reserved CPU (millicores)")
    if milli == 0:
        raise PolicyError("[cpumanager] unable to determine reserved CPU resources for static policy")
    want = -(-milli // 1000)
    try:
        chosen = take_by_topology(topology, td.all, want, options)
    except InsufficientResourcesError:
        chosen = CPUSet()
    if len(chosen) != want:
        raise InsufficientResourcesError(
            f"[cpumanager] unable to reserve the required amount of CPUs (size of {chosen} did not equal {want})")
    return chosen


def reserved_physical_cpus(topology: Topology, reserved: CPUSet | int | Iterable[int]) -> CPUSet:
    """All hyperthread siblings of the reserved CPUs (what full-pcpus-only keeps out of reach)."""
    td = cpu_index(topology)
    mask = as_mask(reserved, "reserved CPUs")
    out = mask
    for cpu in _bits(mask & td.all):
        out |= td.core_mask[td.cpu_core[cpu]]
    return CPUSet(out)


def check_smt_alignment(topology: Topology, n: int, default_cpuset: CPUSet | int | Iterable[int],
                        reserved: CPUSet | int | Iterable[int] = 0,
                        options: CPUOptions | Mapping[str, object] | None = None) -> None:
    """With `full-pcpus-only`, raise `SMTAlignmentError` (kubelet texts) when `n` is not a multiple of
    the CPUs per core or exceeds the free physical CPUs (`default − siblings of reserved`)."""
    opts = as_options(options)
    n = check_count(n)
    if not opts.full_pcpus_only or n == 0:
        return
    td = cpu_index(topology)
    per_core = td.cpus_per_core
    if per_core and n % per_core != 0:
        raise SMTAlignmentError(f"SMT Alignment Error: requested {n} cpus not multiple cpus per core = {per_core}")
    physical = as_mask(default_cpuset, "default cpuset") & ~reserved_physical_cpus(topology, reserved).mask
    free_physical = physical.bit_count()
    if n > free_physical:
        raise SMTAlignmentError(
            f"SMT Alignment Error: not enough free physical CPUs: available physical CPUs = {free_physical}, "
            f"requested CPUs = {n}, CPUs per core = {per_core}")


def allocate_cpus(topology: Topology, n: int, numa_affinity: int | Iterable[int] | None,
                  default_cpuset: CPUSet | int | Iterable[int], reserved: CPUSet | int | Iterable[int] = 0,
                  reusable: CPUSet | int | Iterable[int] | None = None,
                  options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """allocateCPUs (ENGINE.md §2.6): first as many CPUs as fit from the hint's NUMA nodes (or their sockets with
    align-by-socket), then the rest from the remaining allocatable CPUs."""
    td = cpu_index(topology)
    opts = as_options(options)
    n = check_count(n)
    affinity = numa_mask_of(numa_affinity)
    allocatable = ((as_mask(default_cpuset, "default cpuset") & ~as_mask(reserved, "reserved CPUs"))
                   | as_mask(reusable, "reusable CPUs"))
    check_in_topology(td, allocatable, "the allocatable set")
    key = (td, n, affinity, allocatable, opts)
    chosen = _CHOSEN.get(key)
    if chosen is None:
        if len(_CHOSEN) >= _CHOSEN_LIMIT:
            _CHOSEN.clear()
        chosen = _CHOSEN[key] = _choose(topology, td, n, affinity, allocatable, opts)
    return CPUSet(chosen)


# The CPUs `allocate_cpus` picks, by (CPU index, count, NUMA affinity, allocatable CPUs, options): the
# choice depends on nothing else, and a session asks it twice per placed pod (the scheduler's
# prediction on the node's state, then the kubelet's admission on the same state).
_CHOSEN: dict[tuple[CPUIndex, int, int | None, int, CPUOptions], int] = {}
_CHOSEN_LIMIT = 4096


def _choose(topology: Topology, td: CPUIndex, n: int, affinity: int | None, allocatable: int, opts: CPUOptions) -> int:
    result = 0
    if affinity is not None:
        region = 0
        for nid in _bits(affinity):
            region |= td.numa_mask.get(nid, 0)
        if opts.align_by_socket:
            sockets = region
            for sm in td.socket_mask.values():
                if sm & region:
                    sockets |= sm
            region = sockets
        aligned = allocatable & region
        take = min(n, aligned.bit_count())
        result = take_by_topology(topology, aligned, take, opts).mask
    rest = n - result.bit_count()
    return result | take_by_topology(topology, allocatable & ~result, rest, opts).mask


def validate_static_options(topology: Topology, options: CPUOptions | Mapping[str, object] | None) -> CPUOptions:
    """The static policy's machine check of its options (ENGINE.md §2.6): align-by-socket needs at least as many
    NUMA nodes as sockets (declared header)."""
    opts = as_options(options)
    h = topology.header
    if opts.align_by_socket and h.num_sockets > h.num_numa_nodes:
        raise PolicyError("Align by socket is not compatible with hardware where number of sockets are more than "
                          "number of NUMA")
    return opts


def allocate_container(topology: Topology, pod: Pod, container: Container, numa_affinity: int | Iterable[int] | None,
                       default_cpuset: CPUSet | int | Iterable[int], reserved: CPUSet | int | Iterable[int] = 0,
                       reusable: CPUSet | int | Iterable[int] | None = None,
                       options: CPUOptions | Mapping[str, object] | None = None) -> CPUSet:
    """Allocate (ENGINE.md §2.6) for a container without an existing assignment: empty for
    shared-pool containers, `SMTAlignmentError` under full-pcpus-only, else `allocate_cpus` on the
    stored hint's affinity. The caller removes the result from its default cpuset."""
    n = guaranteed_cpus(pod, container)
    if n == 0:
        return CPUSet()
    opts = as_options(options)
    check_smt_alignment(topology, n, default_cpuset, reserved, opts)
    return allocate_cpus(topology, n, numa_affinity, default_cpuset, reserved, reusable, opts)


def update_cpus_to_reuse(container: Container, cpus: CPUSet | int | Iterable[int],
                         reusable: CPUSet | int | Iterable[int] | None) -> CPUSet:
    """updateCPUsToReuse (ENGINE.md §2.5) for one pod: a regular init container's CPUs become reusable by later
    containers; an app or sidecar container's CPUs are removed from the reusable set."""
    mask = as_mask(cpus, f"CPUs of container {container.name}")
    pool = as_mask(reusable, "reusable CPUs")
    return CPUSet(pool | mask if container.kind == INIT else pool & ~mask)


class CPUManager:
    """The static CPU Manager of one node as a Topology Manager hint provider, beside the device and
    memory managers: the shared pool (`default_cpuset`, reserved CPUs already out of it), the CPUs
    each container of the pod being admitted holds, and the CPUs its finished init containers left
    for later containers (cpusToReuse). With a non-static policy it has no hints and pins nothing."""

    resource = "cpu"

    def __init__(self, topology: Topology, default_cpuset: CPUSet, reserved: CPUSet, options: CPUOptions,
                 static: bool = True) -> None:
        self.topology = topology
        self.free = default_cpuset.mask
        self.reserved = reserved
        self.options = options
        self.static = static
        self.assignments: dict[str, CPUSet] = {}
        self.reusable = CPUSet()

    @classmethod
    def for_node(cls, node: Node) -> CPUManager:
        k = node.kubelet
        return cls(node.topology, CPUSet(node.free_cpus), node.reserved_cpus, k.cpu_manager_options, k.static_cpus)

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint]] | None:
        if not self.static:
            return None
        return container_cpu_hints(self.topology, pod, container, self.free, self.reserved, self.assignments,
                                   self.reusable, self.options)

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint]] | None:
        if not self.static:
            return None
        return pod_cpu_hints(self.topology, pod, self.free, self.reserved, self.assignments, self.reusable,
                             self.options)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> Allocation:
        """Pin the container's exclusive CPUs with the merged hint (`SMTAlignmentError` under
        full-pcpus-only); the CPUs leave the shared pool and the reuse set is updated."""
        if not self.static:
            return Allocation(pod.uid, container.name)
        cpus = allocate_container(self.topology, pod, container, hint.affinity, self.free, self.reserved,
                                  self.reusable, self.options)
        if cpus:
            self.assignments[container.name] = cpus
            self.free &= ~cpus.mask
            self.reusable = update_cpus_to_reuse(container, cpus, self.reusable)
        return Allocation(pod.uid, container.name, cpus)
