"""The kubelet's pod admission on one node (ENGINE.md §2.5): the Topology Manager asks the
device, CPU and memory managers for hints, merges them under the node's policy, and either
rejects the pod (`TopologyAffinityError`) or lets every manager allocate with the merged hint.

Unlike the kubelet, a rejection leaves the node exactly as it was (the kubelet cleans up later);
the result says which container and which resource were at fault, and carries every provider's
hints so the decision can be shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EngineError
from ..model.cpuset import CPUSet
from ..model.node import Allocation, Node
from ..model.pods import INIT, Container, Pod
from .cpumanager.policy_static import CPUManager, SMTAlignmentError
from .devicemanager.manager import DeviceManager
from .memorymanager.policy_static import MemoryManager
from .memorymanager.state import MachineState, MemoryTable
from .topologymanager.hint import TopologyHint
from .topologymanager.merge import MergeResult, merge_hints

TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"


class AdmissionError(EngineError):
    """A pod the kubelet rejects; `reason` is the admission reason the kubelet reports."""

    reason = "UnexpectedAdmissionError"

    def __init__(self, message: str, container: str | None = None, resource: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.container = container
        self.resource = resource

    def to_dict(self) -> dict:
        return {"reason": self.reason, "message": self.message, "container": self.container,
                "resource": self.resource}


class TopologyAffinityError(AdmissionError):
    """The Topology Manager's policy did not admit the merged hint of a container (or the pod)."""

    reason = "TopologyAffinityError"


class SMTAlignmentAdmissionError(AdmissionError):
    """`full-pcpus-only` could not be honoured."""

    reason = SMTAlignmentError.reason


@dataclass
class Decision:
    """One Topology Manager decision: for a container (container scope) or the pod (pod scope,
    `container` None): every provider's hints by resource and the merge result."""

    container: str | None
    hints: dict[str, list[TopologyHint] | None]
    merge: MergeResult | None

    def to_dict(self) -> dict:
        return {
            "container": self.container,
            "hints": {r: None if hs is None else [h.to_dict() for h in hs] for r, hs in self.hints.items()},
            "merge": None if self.merge is None else self.merge.to_dict(),
        }


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

    def to_dict(self) -> dict:
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
    if commit and result.admitted:
        for alloc in result.allocations:
            node.allocate(alloc)
    return result


class _Admission:
    """The hint providers of one node for one admission, seeded from the node's allocations, in the
    kubelet's registration order: devices, CPU, memory (None when the Memory Manager is not static)."""

    def __init__(self, node: Node, pod: Pod) -> None:
        self.node, self.pod = node, pod
        k, topo = node.kubelet, node.topology
        self.policy = k.topology_manager_policy
        self.devices = DeviceManager.for_topology(topo)
        for a in node.allocations:
            for res, ids in a.devices.items():
                self.devices.assignments[(a.pod, a.container or "", res)] = frozenset(ids)
        self.cpu = CPUManager.for_node(node)
        self.memory = MemoryManager(_memory_state(node)) if k.static_memory else None
        self.memory_start = _free_tables(self.memory.machine_state) if self.memory else {}
        self.providers = (self.devices, self.cpu, self.memory)
        self.allocated: dict[str, Allocation] = {}

    def _hints(self, container: Container | None) -> list:
        """Every provider's hints for a container (container scope) or the pod (pod scope)."""
        pod = self.pod
        if container is None:
            return [p.get_pod_topology_hints(pod) if p is not None else None for p in self.providers]
        return [p.get_topology_hints(pod, container) if p is not None else None for p in self.providers]

    def _merge(self, container: Container | None) -> tuple[Decision, bool]:
        providers = self._hints(container)
        k, topo = self.node.kubelet, self.node.topology
        merged = merge_hints(self.policy, providers, topo.numa_ids, k.topology_manager_options, topo.distances)
        hints: dict[str, list[TopologyHint] | None] = {}
        for p in providers:
            hints.update(p or {})
        return Decision(None if container is None else container.name, hints, merged), merged.admit

    def _fault(self, decision: Decision) -> str | None:
        """The resource that cannot be aligned: the first whose hints alone are refused, else the
        resources whose hints conflict with each other."""
        k, topo = self.node.kubelet, self.node.topology
        constrained = []
        for res, hs in decision.hints.items():
            alone = merge_hints(self.policy, [{res: hs}], topo.numa_ids, k.topology_manager_options, topo.distances)
            if not alone.admit:
                return res
            if hs is None or any(h.affinity is not None for h in hs):
                constrained.append(res)
        return " + ".join(constrained) or None

    def _allocate(self, container: Container, hint: TopologyHint) -> None:
        pod = self.pod
        try:
            devices = self.devices.allocate(pod, container, hint.affinity)
        except EngineError as exc:
            raise AdmissionError(f"Allocate failed due to {exc}, which is unexpected", container.name) from exc
        try:
            cpus = self.cpu.allocate(pod, container, hint)
        except SMTAlignmentError as exc:
            raise SMTAlignmentAdmissionError(str(exc), container.name, "cpu") from exc
        except EngineError as exc:
            raise AdmissionError(f"Allocate failed due to {exc}, which is unexpected", container.name, "cpu") from exc
        memory: dict[int, dict[str, int]] = {}
        if self.memory is not None:
            before = _free_tables(self.memory.machine_state)
            try:
                self.memory.allocate(pod, container, hint)
            except EngineError as exc:
                raise AdmissionError(f"Allocate failed due to {exc}, which is unexpected",
                                     container.name, "memory") from exc
            memory = _carved(before, _free_tables(self.memory.machine_state))
        self.allocated[container.name] = Allocation(
            pod.uid, container.name, cpus, memory, {r: tuple(sorted(ids)) for r, ids in devices.items() if ids})

    def run(self) -> AdmitResult:
        pod = self.pod
        result = AdmitResult(self.node.name, pod.uid, admitted=False)
        containers = list(pod.all_containers())
        try:
            if self.policy == "none":
                for c in containers:
                    self._allocate(c, TopologyHint(None, False))
            elif self.node.kubelet.topology_manager_scope == "pod":
                decision, admit = self._merge(None)
                result.decisions.append(decision)
                if not admit:
                    raise TopologyAffinityError(TOPOLOGY_AFFINITY_MESSAGE, None, self._fault(decision))
                for c in containers:
                    self._allocate(c, decision.merge.hint)
            else:
                for c in containers:
                    decision, admit = self._merge(c)
                    result.decisions.append(decision)
                    if not admit:
                        raise TopologyAffinityError(TOPOLOGY_AFFINITY_MESSAGE, c.name, self._fault(decision))
                    self._allocate(c, decision.merge.hint)
        except AdmissionError as exc:
            result.error = exc
            return result
        result.admitted = True
        result.allocations = self._running_allocations(containers)
        return result

    def _running_allocations(self, containers: list[Container]) -> list[Allocation]:
        """Resources held once the pod runs: sidecars and app containers keep theirs; regular init
        containers have finished. Memory an app container reused from an init container was carved
        for the init container, so it is added to the first running container that holds memory."""
        running = [self.allocated[c.name] for c in containers if c.kind != INIT and c.name in self.allocated]
        if self.memory is not None:
            for c in containers:
                if c.kind == INIT:
                    self.memory.remove_container(self.pod.uid, c.name)
            held = _carved(self.memory_start, _free_tables(self.memory.machine_state))
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


def _free_tables(state: MachineState) -> dict[int, dict[str, int]]:
    return {nid: {r: t.free for r, t in ns.memory.items()} for nid, ns in state.nodes.items()}


def _carved(before: dict[int, dict[str, int]], after: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for nid, tables in after.items():
        for res, free in tables.items():
            used = before.get(nid, {}).get(res, 0) - free
            if used:
                out.setdefault(nid, {})[res] = used
    return out


def _sum_memory(parts) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for part in parts:
        for nid, res in part.items():
            for r, amount in res.items():
                out.setdefault(nid, {})[r] = out.get(nid, {}).get(r, 0) + amount
    return out


def _subtract(a: dict[int, dict[str, int]], b: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for nid, res in a.items():
        for r, amount in res.items():
            left = amount - b.get(nid, {}).get(r, 0)
            if left > 0:
                out.setdefault(nid, {})[r] = left
    return out
