"""Will the kubelet start? Its start-up, modelled (ENGINE.md §2.10): for a machine, a kubelet
configuration and the node's checkpoint files, the verdict the kubelet reaches before it runs a pod.

In the kubelet's order:
1. construction — the Topology Manager (policy, scope, options, NUMA count), the CPU Manager (policy
   name, reserved CPUs: `reservedSystemCPUs`, else kube- + system-reserved CPU, which the static
   policy needs above zero; options) and the Memory Manager (policy name; the static policy needs
   reserved memory);
2. the CPU Manager's start — `cpu_manager_state` restored (the policy that wrote it must be the
   configured one), then the static policy's validateState (reserved CPUs in the shared pool, no
   assigned CPU in it, every CPU of the machine accounted for);
3. the Memory Manager's start — `memory_manager_state` restored (same policy check), then the static
   policy's validateState (the stored machine state must equal the one computed from the
   configuration with every block replayed).

A refusal carries the kubelet's exact text (as it logs it when it exits), the file the operator must
delete when the checkpoint is at fault, and the pods the checkpoints pin (they leave the node when it is
drained). A start carries the shared pool and assignments the kubelet starts with.

Not modelled: the checkpoint checksum (it hashes Go's in-memory dump; a hand-edited file the kubelet
would refuse as corrupted is read here), the v1→v2 migration's container-id lookup, feature gates, and
the Device Manager's checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import EngineError, PolicyError, TopologyError
from ..formats.kubelet_state import cpu_state
from ..model.cpuset import CPUSet
from ..model.kubelet_config import TOPOLOGY_POLICIES, TOPOLOGY_SCOPES, KubeletConfig, TopologyOptions, choice
from ..model.node import Node
from ..model.quantity import format_bytes
from ..model.topology import Topology
from .checkpoint import dump_cpu_checkpoint, dump_memory_checkpoint, memory_checkpoint
from .cpumanager.policy_static import StateValidationError, StaticPolicy
from .memorymanager.policy_static import MemoryAllocationError
from .memorymanager.start_state import (
    check_system_reserved,
    default_machine_state,
    machine_of,
    replay_blocks,
    validate_state,
)
from .memorymanager.state import Block, MachineState
from .topologymanager.numa_info import NUMAInfo
from .topologymanager.policies import POLICIES

CPU_STATE_FILE = "/var/lib/kubelet/cpu_manager_state"
MEMORY_STATE_FILE = "/var/lib/kubelet/memory_manager_state"
TOPOLOGY, CPU, MEMORY = "Topology Manager", "CPU Manager", "Memory Manager"
CONFIGURATION, CHECKPOINT = "configuration", "checkpoint"


@dataclass
class Refusal:
    """Why the kubelet exits: `manager`, `stage` (its configuration, or a checkpoint it will not take),
    `message` (the kubelet's text), `cause` (the manager's own error inside it) and `file` (the
    checkpoint to delete, for a checkpoint refusal)."""

    manager: str
    stage: str
    message: str
    cause: str
    file: str | None = None

    @property
    def action(self) -> str:
        """What the operator must do before the kubelet will start."""
        if self.file is None:
            return f"fix the kubelet configuration ({self.manager}): {self.cause}"
        return (f"drain the node (kubectl drain NODE --ignore-daemonsets --delete-emptydir-data), stop the kubelet, "
                f"delete {self.file}, start the kubelet, then uncordon the node")

    def to_dict(self) -> dict[str, Any]:
        return {"manager": self.manager, "stage": self.stage, "message": self.message, "cause": self.cause,
                "file": self.file, "action": self.action}


@dataclass
class StartVerdict:
    """The kubelet's start-up verdict: `starts`, or the `refusal`; what it starts with (the CPU
    Manager's shared pool and assignments, the Memory Manager's machine state and blocks; None for a
    manager whose policy keeps no state); `checked`: what was verified, in order."""

    starts: bool
    refusal: Refusal | None = None
    default_cpuset: CPUSet | None = None
    assignments: dict[str, dict[str, CPUSet]] = field(default_factory=dict)
    machine_state: MachineState | None = None
    memory_assignments: dict[str, dict[str, list[Block]]] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)

    @property
    def pinned_pods(self) -> list[str]:
        """Pod uids the checkpoints hold exclusive CPUs or NUMA memory for."""
        return sorted(set(self.assignments) | set(self.memory_assignments))

    @property
    def pods_to_move(self) -> list[str]:
        """The pinned pods a refusal makes leave the node (the drain evicts them; their CPUs and memory
        are handed out afresh when they come back); none when the kubelet starts."""
        if self.starts or self.refusal is None or self.refusal.file is None:
            return []
        return self.pinned_pods

    @property
    def summary(self) -> str:
        if self.starts:
            pool = "" if self.default_cpuset is None else f" with shared pool {self.default_cpuset or '(empty)'}"
            return f"the kubelet starts{pool}, keeping the {len(self.pinned_pods)} pods its checkpoints pin"
        if self.refusal is None:  # a verdict not (yet) given: no refusal to quote
            return "the kubelet does not start"
        return f"the kubelet refuses to start: {self.refusal.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "starts": self.starts,
            "summary": self.summary,
            "refusal": None if self.refusal is None else self.refusal.to_dict(),
            "default_cpuset": None if self.default_cpuset is None else str(self.default_cpuset),
            "assignments": {p: {c: str(cpus) for c, cpus in cs.items()} for p, cs in sorted(self.assignments.items())},
            "machine_state": None if self.machine_state is None else self.machine_state.to_dict(),
            "memory_assignments": {p: {c: [b.to_dict() for b in bs] for c, bs in cs.items()}
                                   for p, cs in sorted(self.memory_assignments.items())},
            "pods_to_move": self.pods_to_move,
            "checked": list(self.checked),
        }


class _Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


#: how the kubelet names each manager in its start-up errors: (container manager's prefix, checkpoint's)
_NAMES = {CPU: ("start cpu manager error", "CPU manager"), MEMORY: ("start memory manager error", "memory manager")}


def _restore_failed(manager: str, cause: str, file: str) -> _Refused:
    """A checkpoint the manager cannot restore (NewCheckpointState's wrapping, then the container manager's)."""
    start, name = _NAMES[manager]
    wrapped = (f"could not restore state from checkpoint: {cause}, please drain this node and delete the {name} "
               f'checkpoint file "{file}" before restarting Kubelet')
    return _Refused(Refusal(manager, CHECKPOINT, f"{start}: {wrapped}", cause, file))


def _start_failed(manager: str, cause: str, file: str) -> _Refused:
    """A checkpoint the policy's validateState refuses."""
    return _Refused(Refusal(manager, CHECKPOINT, f"{_NAMES[manager][0]}: {cause}", cause, file))


def _construction_failed(manager: str, cause: str) -> _Refused:
    return _Refused(Refusal(manager, CONFIGURATION, cause, cause))


def new_topology_manager(numa_nodes: Iterable[int], policy: str, scope: str = "container",
                         options: Mapping[str, object] | TopologyOptions | None = None,
                         distances: Mapping[int, Sequence[int]] | None = None) -> tuple[str, str]:
    """The Topology Manager's construction (NewManager, ENGINE.md §2.4) with the kubelet's error texts:
    a policy that merges nothing (`none`) runs the none scope and accepts anything else as is; otherwise
    the options are parsed, the NUMA information built (distances needed with prefer-closest-numa-nodes),
    the NUMA count checked against max-allowable-numa-nodes, then the policy and the scope names.
    Returns (policy, scope)."""
    known = POLICIES.get(policy)
    if known is not None and not known.merges:
        return policy, "container"
    opts = TopologyOptions.parse(options)
    nodes = list(numa_nodes)
    try:
        NUMAInfo.build(nodes, distances, opts.prefer_closest_numa_nodes)
    except TopologyError as exc:
        raise PolicyError(str(exc), "topology_manager_options") from None
    if len(nodes) > opts.max_allowable_numa_nodes:
        raise PolicyError(f"unsupported on machines with more than {opts.max_allowable_numa_nodes} NUMA Nodes",
                          "topology_manager_options")
    choice(policy, TOPOLOGY_POLICIES, "policy", "topology_manager_policy")
    choice(scope, TOPOLOGY_SCOPES, "scope", "topology_manager_scope")
    return policy, scope


def reserved_cpu_count(config: KubeletConfig) -> int:
    """The static policy's reserved count: the size of `reservedSystemCPUs` (the kubelet then
    overrides kube- and system-reserved CPU with it), else the reserved millicores rounded up."""
    if config.reserved_cpus:
        return len(config.reserved_cpus)
    return -(-config.reserved_cpu_milli // 1000)


def kubelet_start(topology: Topology, config: KubeletConfig, cpu_state: str | None = None,
                  memory_state: str | None = None, *, memory_reservation: Mapping[str, int] | None = None,
                  cpu_state_file: str = CPU_STATE_FILE, memory_state_file: str = MEMORY_STATE_FILE) -> StartVerdict:
    """The verdict of a kubelet with `config` on `topology` given the checkpoint texts (None: no file,
    a fresh start). `memory_reservation` is the node-allocatable memory per type (kube- + system-reserved
    + hard eviction, from a KubeletConfiguration): with it, the static Memory Manager's `reservedMemory`
    must add up to it, as the kubelet checks. A checkpoint that is not valid JSON of its kind raises
    `FormatError`."""
    verdict = StartVerdict(starts=False)
    try:
        policy = _construct(topology, config, memory_reservation, verdict)
        _start_cpu(config, policy, cpu_state, cpu_state_file, verdict)
        _start_memory(topology, config, memory_state, memory_state_file, verdict)
    except _Refused as refused:
        verdict.refusal = refused.refusal
        return verdict
    verdict.starts = True
    return verdict


def _construct(topology: Topology, config: KubeletConfig, memory_reservation: Mapping[str, int] | None,
               verdict: StartVerdict) -> StaticPolicy | None:
    reserved = config.reserved_cpus or CPUSet()
    if reserved - CPUSet(topology.all_cpus):  # checked when the kubelet reads its flags, whatever the policy
        raise _construction_failed(CPU, f"reserved-cpus: {reserved} is not a subset of online-cpus: "
                                        f"{CPUSet(topology.all_cpus)}")
    try:
        new_topology_manager(topology.numa_ids, config.topology_manager_policy, config.topology_manager_scope,
                             config.topology_manager_options, topology.distances)
    except EngineError as exc:
        raise _construction_failed(TOPOLOGY, str(exc)) from None
    verdict.checked.append(f"Topology Manager: policy {config.topology_manager_policy}, scope "
                           f"{config.topology_manager_scope}, {len(topology.numa_ids)} NUMA nodes")
    policy = None
    if config.static_cpus:
        count = reserved_cpu_count(config)
        if count == 0:
            raise _construction_failed(CPU, "[cpumanager] the static policy requires systemreserved.cpu + "
                                            "kubereserved.cpu to be greater than zero")
        try:
            policy = StaticPolicy(topology, count, config.reserved_cpus, config.cpu_manager_options,
                                  config.topology_manager_policy)
        except EngineError as exc:
            raise _construction_failed(CPU, f"new static policy error: {exc}") from None
        verdict.checked.append(f"CPU Manager: static policy, reserved CPUs {policy.reserved}")
    else:
        verdict.checked.append("CPU Manager: none policy")
    if config.static_memory:
        if memory_reservation is not None:
            _check_reserved_memory(config, memory_reservation)
        try:
            check_system_reserved(config.reserved_memory)
        except MemoryAllocationError as exc:
            raise _construction_failed(MEMORY, str(exc)) from None
        verdict.checked.append("Memory Manager: Static policy with reserved memory")
    else:
        verdict.checked.append("Memory Manager: None policy")
    return policy


def _check_reserved_memory(config: KubeletConfig, reservation: Mapping[str, int]) -> None:
    """validateReservedMemory: per memory type, reservedMemory over all NUMA nodes must equal the
    node-allocatable reservation."""
    totals: dict[str, int] = {}
    for resources in config.reserved_memory.values():
        for res, amount in resources.items():
            totals[res] = totals.get(res, 0) + amount
    for res in sorted(set(totals) | set(reservation)):
        have, want = totals.get(res, 0), reservation.get(res, 0)
        if have != want:
            raise _construction_failed(MEMORY, f'the total amount "{format_bytes(have)}" of type "{res}" is not equal '
                                               f'to the value "{format_bytes(want)}" determined by Node Allocatable '
                                               "feature")


def _start_cpu(config: KubeletConfig, policy: StaticPolicy | None, text: str | None,
               file: str, verdict: StartVerdict) -> None:
    name = config.cpu_manager_policy
    default = CPUSet()
    assignments: dict[str, dict[str, CPUSet]] = {}
    if text is not None:
        state = cpu_state(text)
        if state["policy"] != name:
            raise _restore_failed(CPU, f'configured policy "{name}" differs from state checkpoint policy '
                                       f'"{state["policy"]}"', file)
        default = state["default"]
        for (pod, container), cpus in state["entries"].items():
            assignments.setdefault(pod, {})[container] = cpus
        verdict.checked.append(f"{file}: written by the {name} policy")
    verdict.assignments = assignments
    if policy is None:
        return
    try:
        verdict.default_cpuset = policy.start(default, assignments)
    except StateValidationError as exc:
        raise _start_failed(CPU, str(exc), file) from None
    verdict.assignments = policy.assignments
    verdict.checked.append(f"{file}: shared pool {verdict.default_cpuset}, "
                           f"{sum(len(c) for c in policy.assignments.values())} containers with exclusive CPUs")


def _start_memory(topology: Topology, config: KubeletConfig, text: str | None, file: str,
                  verdict: StartVerdict) -> None:
    name = config.memory_manager_policy
    stored, entries = MachineState({}), {}
    if text is not None:
        checkpoint = memory_checkpoint(text)
        if checkpoint["policy"] != name:
            raise _restore_failed(MEMORY, f'[memorymanager] configured policy "{name}" differs from state '
                                          f'checkpoint policy "{checkpoint["policy"]}"', file)
        stored, entries = checkpoint["machine_state"], checkpoint["entries"]
        verdict.checked.append(f"{file}: written by the {name} policy")
    verdict.memory_assignments = entries
    if not config.static_memory:
        return
    expected = default_machine_state(machine_of(topology), config.reserved_memory)
    try:
        verdict.machine_state = validate_state(stored, entries, expected)
    except MemoryAllocationError as exc:
        raise _start_failed(MEMORY, str(exc), file) from None
    verdict.checked.append(f"{file}: machine state matches the configuration with "
                           f"{sum(len(c) for c in entries.values())} containers' memory replayed")


def changed_settings(before: KubeletConfig, after: KubeletConfig) -> dict[str, tuple[object, object]]:
    """The settings a planned configuration changes: {setting: (before, after)}."""
    a, b = before.to_dict(), after.to_dict()
    return {k: (a[k], b[k]) for k in a if a[k] != b[k]}



def model_checkpoints(node: Node) -> tuple[str, str | None]:
    """The checkpoints the kubelet would have written for `node` as the engine holds it (its settings,
    its allocations as assignments): `cpu_manager_state` and, with the static Memory Manager,
    `memory_manager_state` (else None). A container's memory on several NUMA nodes is one block per
    resource over those nodes. What a planned configuration is judged against when no real file is given."""
    k = node.kubelet
    assignments: dict[str, dict[str, CPUSet]] = {}
    blocks: dict[str, dict[str, list[Block]]] = {}
    assigned = 0
    for a in node.allocations:
        name = a.container or "-"
        if a.cpus and k.static_cpus:
            assignments.setdefault(a.pod, {})[name] = a.cpus
            assigned |= a.cpus.mask
        per_resource: dict[str, list[int]] = {}
        for nid, res in sorted(a.memory.items()):
            for r, amount in res.items():
                if amount:
                    per_resource.setdefault(r, []).append(nid)
        if per_resource and k.static_memory:
            blocks.setdefault(a.pod, {})[name] = [
                Block(tuple(nids), r, sum(a.memory[n][r] for n in nids))
                for r, nids in sorted(per_resource.items(), key=lambda kv: (kv[0] != "memory", kv[0]))]
    if k.static_cpus:
        pool = node.topology.all_cpus & ~assigned
        if k.cpu_manager_options.strict_cpu_reservation:
            pool &= ~node.reserved_cpus.mask
        cpu_text = dump_cpu_checkpoint("static", CPUSet(pool), assignments)
    else:
        cpu_text = dump_cpu_checkpoint("none", CPUSet(), {})
    if not k.static_memory:
        return cpu_text, None
    state = replay_blocks(default_machine_state(machine_of(node.topology), k.reserved_memory), blocks)
    return cpu_text, dump_memory_checkpoint("Static", state, blocks)
