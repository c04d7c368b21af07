"""The kubelet's pod admission on one node (ENGINE.md §2.5): the Topology Manager asks the
device, CPU and memory managers for hints, merges them under the node's policy, and either
rejects the pod (`TopologyAffinityError`) or lets every manager allocate with the merged hint.

Unlike the kubelet, a rejection leaves the node exactly as it was (the kubelet cleans up later);
the result says which container and which resource were at fault, and carries every provider's
hints so the decision can be shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model.cpuset import CPUSet
from ..model.node import Allocation, Node
from ..model.pods import INIT, Container, Pod
from .cpumanager.cpu_manager import CPUManager
from .devicemanager.manager import DeviceManager
from .memorymanager.policy_none import NoneMemoryManager
from .memorymanager.policy_static import MemoryByNUMA, MemoryManager, in_table_order
from .memorymanager.state import MachineState, MemoryTable
from .topologymanager.hint import TopologyHint
from .topologymanager.scope import AdmissionError, Decision, HintProvider, TopologyAffinityError
from .topologymanager.scopes import scope_for

__all__ = ["AdmissionError", "AdmitResult", "Decision", "TopologyAffinityError", "admit_pod", "commit_admission"]


@dataclass
class AdmitResult:
    """The verdict for a pod on a node; `allocations` are those of the running pod (regular init
    containers have finished, so their resources are not held)."""

    node: str
    pod: str
    admitted: bool
    error: AdmissionError | None = None
    allocations: list[Allocation] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    @property
    def reason(self) -> str | None:
        return None if self.error is None else self.error.reason

    @property
    def hint(self) -> TopologyHint | None:
        """The merged hint of the last decision taken (the pod's hint in pod scope)."""
        merged = [d.merge for d in self.decisions if d.merge is not None]
        return merged[-1].hint if merged else None

    @property
    def cpus(self) -> CPUSet:
        out = CPUSet()
        for a in self.allocations:
            out |= a.cpus
        return out

    def relabeled(self, node: str, pod: str) -> AdmitResult:
        """This verdict as the admission of another pod of the same shape on another node in the same
        state gives it: the same decisions and resources, held by `pod` on `node`."""
        held = [Allocation(pod, a.container, a.cpus, a.memory, a.devices, a.origin) for a in self.allocations]
        return AdmitResult(node, pod, self.admitted, self.error, held, list(self.decisions))

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pod": self.pod,
            "admitted": self.admitted,
            "error": None if self.error is None else self.error.to_dict(),
            "cpus": str(self.cpus),
            "allocations": [a.to_dict() for a in self.allocations],
            "decisions": [d.to_dict() for d in self.decisions],
        }


def admit_pod(node: Node, pod: Pod, commit: bool = True) -> AdmitResult:
    """Admit `pod` on `node` as its kubelet would, with the node's scope, policy and options.

    With `commit`, a pod that is admitted has its allocations recorded on the node; a rejected pod
    never changes the node. Raises `PolicyError` when the kubelet would not start with these
    settings (e.g. more NUMA nodes than `max-allowable-numa-nodes`).
    """
    run = _Admission(node, pod)
    result = run.run()
    if commit:
        commit_admission(node, result)
    return result


def commit_admission(node: Node, result: AdmitResult) -> None:
    """Record an admitted pod's allocations on the node (a rejected pod changes nothing)."""
    if result.admitted:
        for alloc in result.allocations:
            node.allocate(alloc)


class _Admission:
    """The hint providers of one node for one admission, seeded from the node's allocations, in the
    kubelet's registration order: devices, CPU, memory."""

    def __init__(self, node: Node, pod: Pod) -> None:
        self.node, self.pod = node, pod
        k, topo = node.kubelet, node.topology
        devices = DeviceManager.for_topology(topo)
        for a in node.allocations:
            for res, ids in a.devices.items():
                devices.assignments[(a.pod, a.container or "", res)] = frozenset(ids)
        self.memory = MemoryManager(_memory_state(node)) if k.static_memory else None
        memory: HintProvider = self.memory or NoneMemoryManager()
        self.providers: tuple[HintProvider, ...] = (devices, CPUManager.for_node(node), memory)

    def run(self) -> AdmitResult:
        pod, node = self.pod, self.node
        k, topo = node.kubelet, node.topology
        result = AdmitResult(node.name, pod.uid, admitted=False)
        scope = scope_for(k.topology_manager_policy, k.topology_manager_scope)(
            k.topology_manager_policy, self.providers, topo.numa_ids, k.topology_manager_options, topo.distances)
        try:
            scope.admit(pod)
        except AdmissionError as exc:
            result.error = exc
            return result
        finally:
            result.decisions = scope.decisions
        result.admitted = True
        result.allocations = self._running_allocations(list(pod.all_containers()), scope.allocated)
        return result

    def _running_allocations(self, containers: list[Container], allocated: dict[str, Allocation]) -> list[Allocation]:
        """Resources held once the pod runs: sidecars and app containers keep theirs; regular init
        containers have finished. Memory an app container reused from an init container was carved
        for the init container, so it is added to the first running container that holds memory."""
        running = [allocated[c.name] for c in containers if c.kind != INIT and c.name in allocated]
        if self.memory is not None:
            released = [self.memory.remove_container(self.pod.uid, c.name) for c in containers if c.kind == INIT]
            carved = _sum_memory(a.memory for a in allocated.values())
            held = in_table_order(self.memory.machine_state, _subtract(carved, _sum_memory(released)))
            extra = _subtract(held, _sum_memory(a.memory for a in running))
            for i, alloc in enumerate(running):
                if extra and alloc.memory:
                    running[i] = Allocation(alloc.pod, alloc.container, alloc.cpus,
                                            _sum_memory([alloc.memory, extra]), alloc.devices)
                    break
        return [a for a in running if a.cpus or a.memory or a.devices]


# -- memory bookkeeping --------------------------------------------------------------------------------

def _memory_state(node: Node) -> MachineState:
    """The Memory Manager's machine state for a node, with its current allocations replayed."""
    state = MachineState.from_topology(node.topology, node.kubelet.reserved_memory)
    for alloc in node.allocations:
        group = sorted(alloc.memory)
        for nid, resources in alloc.memory.items():
            ns = state.node(nid)
            for res, amount in resources.items():
                table = ns.memory.setdefault(res, MemoryTable())
                table.free -= amount
                table.reserved += amount
                ns.assignments += 1
            ns.cells = list(group)
    return state


def _sum_memory(parts: Iterable[Mapping[int, Mapping[str, int]]]) -> MemoryByNUMA:
    out: MemoryByNUMA = {}
    for part in parts:
        for nid, res in part.items():
            for r, amount in res.items():
                out.setdefault(nid, {})[r] = out.get(nid, {}).get(r, 0) + amount
    return out


def _subtract(a: MemoryByNUMA, b: MemoryByNUMA) -> MemoryByNUMA:
    """`a` − `b` per NUMA node and resource, where it is positive."""
    out: MemoryByNUMA = {}
    for nid, res in a.items():
        for r, amount in res.items():
            left = amount - b.get(nid, {}).get(r, 0)
            if left > 0:
                out.setdefault(nid, {})[r] = left
    return out
