"""The CPU Manager's static policy (upstream `policy_static.go`) as a state machine over its checkpoint
(ENGINE.md §2.10): the shared pool (`defaultCpuSet`) and the assignments are inputs, as the kubelet reads
them from `cpu_manager_state`, not derived from the allocations.

- `StaticPolicy(topology, num_reserved, reserved_cpus, options)`: NewStaticPolicy — options parsed and
  checked against the machine, reserved CPUs chosen (or the explicit list cross-checked against the
  reserved count, with the kubelet's `unable to reserve the required amount of CPUs` text);
- `.start(default_cpuset, assignments)`: Start's validateState, with the kubelet's texts; an empty pool
  and no assignments is a fresh state;
- `.allocate(pod, container, hint)`, `.remove_container(pod_uid, name)`: Allocate (a container already
  in the state keeps its CPUs) and RemoveContainer on that state.

Admission on a `Node` (`cpu_manager.CPUManager`) keeps its own per-admission bookkeeping; this class is for
what the kubelet does with its checkpoint at start and for the upstream state-machine tables.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping

from ...errors import EngineError, InsufficientResourcesError, PolicyError, check_int
from ...model.cpuset import CPUSet
from ...model.kubelet_config import CPUOptions
from ...model.pods import Container, Pod, guaranteed_cpus
from ...model.topology import Topology
from ..topologymanager.hint import TopologyHint
from .cpu_assignment import take_by_topology
from .cpu_index import as_mask, as_options, cpu_index
from .cpu_manager import (
    allocate_cpus,
    check_smt_alignment,
    update_cpus_to_reuse,
    validate_static_options,
)

#: pod uid -> container name -> CPUs (the checkpoint's `entries`)
Assignments = dict[str, dict[str, CPUSet]]


class StateValidationError(EngineError):
    """The checkpoint does not fit the policy; the message is the kubelet's validateState text."""

    kind = "StateValidation"


class StaticPolicy:
    """One node's static CPU Manager policy and its state (shared pool, assignments, CPUs to reuse)."""

    def __init__(self, topology: Topology, num_reserved: int, reserved_cpus: CPUSet | int | Iterable[int] | None = None,
                 options: CPUOptions | Mapping[str, object] | None = None,
                 topology_policy: str | None = None) -> None:
        self.topology = topology
        self.options = as_options(options)
        validate_static_options(topology, self.options)
        if self.options.align_by_socket and topology_policy == "single-numa-node":
            raise PolicyError("Topolgy manager single-numa-node policy is incompatible with CPUManager "
                              "align-by-socket policy option")  # sic: the kubelet's spelling
        num_reserved = check_int(num_reserved, "number of reserved CPUs", error=PolicyError)
        td = cpu_index(topology)
        explicit = as_mask(reserved_cpus, "reserved CPUs")
        if explicit:
            reserved = CPUSet(explicit)
        else:
            try:
                reserved = take_by_topology(topology, td.all, num_reserved, self.options)
            except InsufficientResourcesError:
                reserved = CPUSet()
        if len(reserved) != num_reserved:
            raise PolicyError(f"[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} "
                              f"did not equal {num_reserved})")
        self.reserved = reserved
        self.default = CPUSet()
        self.assignments: Assignments = {}
        self.reusable: dict[str, CPUSet] = {}

    @property
    def all_cpus(self) -> CPUSet:
        """The CPUs the state must account for: the machine's, minus reserved with strict-cpu-reservation."""
        mask = self.topology.all_cpus
        if self.options.strict_cpu_reservation:
            mask &= ~self.reserved.mask
        return CPUSet(mask)

    def start(self, default_cpuset: CPUSet | int | Iterable[int] | None = None,
              assignments: Mapping[str, Mapping[str, CPUSet | int | Iterable[int]]] | None = None) -> CPUSet:
        """validateState: take the checkpoint's state, or refuse it with the kubelet's text
        (`StateValidationError`). Returns the shared pool the policy starts with."""
        default = CPUSet(as_mask(default_cpuset, "defaultCpuSet"))
        state = {pod: {name: CPUSet(as_mask(cpus, f"CPUs of {pod}/{name}")) for name, cpus in containers.items()}
                 for pod, containers in (assignments or {}).items()}
        if not default:
            if state:
                raise StateValidationError("default cpuset cannot be empty")
            self.default, self.assignments = self.all_cpus, {}
            return self.default
        if self.options.strict_cpu_reservation:
            overlap = self.reserved & default
            if overlap:
                raise StateValidationError(f'some of strictly reserved cpus: "{overlap}" are present in '
                                           f'defaultCpuSet: "{default}"')
        elif (self.reserved & default) != self.reserved:
            raise StateValidationError(f'not all reserved cpus: "{self.reserved}" are present in '
                                       f'defaultCpuSet: "{default}"')
        for pod, containers in state.items():
            for name, cpus in containers.items():
                if cpus & default:
                    raise StateValidationError(f'pod: {pod}, container: {name} cpuset: "{cpus}" overlaps with '
                                               f'default cpuset "{default}"')
        assigned = (c for containers in state.values() for c in containers.values())
        known = functools.reduce(operator.or_, assigned, default)
        if known != self.all_cpus:
            raise StateValidationError(f'current set of available CPUs "{self.all_cpus}" doesn\'t match with CPUs '
                                       f'in state "{known}"')
        self.default, self.assignments = default, state
        return default

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint | None = None) -> CPUSet | None:
        """Allocate: None for a shared-pool container; a container already in the state keeps its CPUs
        (after the full-pcpus-only checks, as upstream orders them); else new exclusive CPUs."""
        n = guaranteed_cpus(pod, container)
        if n == 0:
            return None
        check_smt_alignment(self.topology, n, self.default, self.reserved, self.options)
        held = self.assignments.get(pod.uid, {}).get(container.name)
        if held is not None:
            self._reuse(pod, container, held)
            return held
        affinity = None if hint is None else hint.affinity
        cpus = allocate_cpus(self.topology, n, affinity, self.default, self.reserved,
                             self.reusable.get(pod.uid), self.options)
        self.assignments.setdefault(pod.uid, {})[container.name] = cpus
        self._reuse(pod, container, cpus)
        self.default = self.default - cpus
        return cpus

    def _reuse(self, pod: Pod, container: Container, cpus: CPUSet) -> None:
        # upstream keeps the reuse set of the most recent pod only
        previous = self.reusable.get(pod.uid)
        self.reusable = {pod.uid: update_cpus_to_reuse(container, cpus, previous)}

    def remove_container(self, pod_uid: str, name: str) -> bool:
        """RemoveContainer: the container's CPUs (minus those its pod's other containers still hold) go
        back to the shared pool. Returns whether the state held the container."""
        containers = self.assignments.get(pod_uid, {})
        cpus = containers.pop(name, None)
        if cpus is None:
            return False
        if not containers:
            del self.assignments[pod_uid]
        siblings = functools.reduce(operator.or_, containers.values(), CPUSet())
        self.default = self.default | (cpus - siblings)
        return True
