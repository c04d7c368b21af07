"""The kubelet model checked against a real node: replay the containers of its `cpu_manager_state`
(and `memory_manager_state`) through `admit_pod` and compare, container by container, the CPUs and
memory the model predicts with those the kubelet wrote.

Which containers, in which order:
- with pods (objects with `metadata.uid`, in admission order): each pod as its spec says; its
  state entries are found by uid (v2 layout) and container name;
- without: the containers found in the state file, each a Guaranteed container asking for as many
  CPUs as it holds (and the memory the memory state gives it), pods in the order of their lowest
  assigned CPU — the kubelet hands out low ids first, so that is the admission order in the usual
  case. A v1 state file (container ids, no pods) is checked the same way.

A mismatch is explained when it can be: the file's CPU Manager policy differs from the node's; the
replay matches everywhere under one other setting (a static policy option, the Topology Manager
policy or scope) — "written under another policy option"; CPUs not on this node; or, per container,
the NUMA nodes of the predicted and actual CPUs.

Beside the comparison, the kubelet's start-up verdict (`kubelet_start`) for the same files: with the
node's settings, or with a planned configuration (`config`), whether the kubelet would start with
these checkpoints, and if not its text, what the operator must do and which pinned pods move.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import EngineError, FormatError
from ..formats.kubelet_state import cpu_state as parse_cpu
from ..formats.kubelet_state import memory_state as parse_memory
from ..model.cpuset import CPUSet
from ..model.kubelet_config import CPU_OPTIONS, TOPOLOGY_POLICIES, TOPOLOGY_SCOPES, CPUOptions, KubeletConfig
from ..model.node import Node
from ..model.pods import GUARANTEED, Container, Pod
from .admission import AdmitResult, admit_pod
from .kubelet_start import StartVerdict, changed_settings, kubelet_start

#: a state file's entries by (pod, container): CPUs, and memory per NUMA node and resource
CPUEntries = Mapping[tuple[str, str], CPUSet]
MemoryEntries = Mapping[tuple[str, str], dict[int, dict[str, int]]]


@dataclass
class ContainerCheck:
    pod: str
    container: str
    actual_cpus: CPUSet
    predicted_cpus: CPUSet
    actual_memory: dict[int, dict[str, int]] | None = None
    predicted_memory: dict[int, dict[str, int]] | None = None
    error: str = ""
    why: str = ""

    @property
    def match(self) -> bool:
        if self.error or self.actual_cpus != self.predicted_cpus:
            return False
        return self.actual_memory is None or self.actual_memory == (self.predicted_memory or {})

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "container": self.container, "actual_cpus": str(self.actual_cpus),
                "predicted_cpus": str(self.predicted_cpus), "actual_memory": _memory_dict(self.actual_memory),
                "predicted_memory": _memory_dict(self.predicted_memory), "match": self.match, "error": self.error,
                "why": self.why}


def _memory_dict(memory: Mapping[int, Mapping[str, int]] | None) -> dict[str, dict[str, int]] | None:
    return None if memory is None else {str(n): dict(r) for n, r in sorted(memory.items())}


@dataclass
class StateCheck:
    node: str
    file_policy: str
    order: str
    containers: list[ContainerCheck] = field(default_factory=list)
    actual_default: CPUSet = field(default_factory=CPUSet)
    predicted_default: CPUSet = field(default_factory=CPUSet)
    reasons: list[str] = field(default_factory=list)
    #: would a kubelet with the node's (or the planned) settings start with these files
    start: StartVerdict | None = None
    #: the settings the planned configuration changes: {setting: (node's, planned)}
    planned: dict[str, tuple[object, object]] = field(default_factory=dict)

    @property
    def mismatches(self) -> list[ContainerCheck]:
        return [c for c in self.containers if not c.match]

    @property
    def verdict(self) -> str:
        bad = self.mismatches
        if not bad and not self.reasons:
            return f"all {len(self.containers)} containers match"
        head = (f"{len(bad)} of {len(self.containers)} containers do not match" if bad
                else f"all {len(self.containers)} containers match, but")
        return f"{head}: {'; '.join(self.reasons) or 'see each container'}"

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "file_policy": self.file_policy, "order": self.order,
                "verdict": self.verdict, "match": not self.mismatches and not self.reasons,
                "mismatches": len(self.mismatches), "reasons": list(self.reasons),
                "actual_default_cpuset": str(self.actual_default),
                "predicted_default_cpuset": str(self.predicted_default),
                "containers": [c.to_dict() for c in self.containers],
                "start": None if self.start is None else self.start.to_dict(),
                "planned_changes": {k: {"node": a, "planned": b} for k, (a, b) in self.planned.items()}}


def replay(node: Node, pods: Iterable[Pod]) -> list[AdmitResult]:
    """Admit `pods` one after the other on `node` (committing each admitted one): the AdmitResults."""
    return [admit_pod(node, pod, commit=True) for pod in pods]


def _state_pods(cpu_entries: CPUEntries, mem_entries: MemoryEntries) -> tuple[list[Pod], str]:
    """Pods rebuilt from the state files alone, ordered by their lowest assigned CPU."""
    by_pod: dict[str, dict[str, CPUSet]] = {}
    for (pod, container), cpus in cpu_entries.items():
        by_pod.setdefault(pod, {})[container] = cpus
    for pod, container in mem_entries:
        by_pod.setdefault(pod, {}).setdefault(container, CPUSet())

    def low(cpus: CPUSet) -> int:
        mask = cpus.mask
        return (mask & -mask).bit_length() if mask else 1 << 20

    pods = []
    for uid, containers in by_pod.items():
        ordered = sorted(containers.items(), key=lambda kv: (low(kv[1]), kv[0]))
        built = []
        for name, cpus in ordered:
            memory = sum(b for res in mem_entries.get((uid, name), {}).values() for r, b in res.items()
                         if r == "memory")
            res = {"cpu": len(cpus) * 1000} if cpus else {}
            if memory:
                res["memory"] = memory
            built.append(Container(name, res, res))
        pods.append((min((low(c) for c in containers.values()), default=1 << 20), uid,
                     Pod(uid.replace("/", "-")[:253] or "pod", tuple(built), uid=uid, qos=GUARANTEED)))
    pods.sort(key=lambda t: (t[0], t[1]))
    return [p for _, _, p in pods], "lowest assigned CPU"


def _run(node: Node, pods: Sequence[Pod], cpu_entries: CPUEntries, mem_entries: MemoryEntries | None,
         ) -> list[ContainerCheck]:
    fresh = Node(node.name, node.topology, node.kubelet)
    out = []
    for pod, result in zip(pods, replay(fresh, pods), strict=True):
        predicted = {a.container: a for a in result.allocations}
        error = "" if result.admitted else f"the replay refuses the pod: {result.error}"
        for c in pod.all_containers():
            key = (pod.uid, c.name)
            actual = cpu_entries.get(key, CPUSet())
            alloc = predicted.get(c.name)
            check = ContainerCheck(pod.uid, c.name, actual, alloc.cpus if alloc else CPUSet(),
                                   None if mem_entries is None else mem_entries.get(key, {}),
                                   None if alloc is None else {n: dict(r) for n, r in alloc.memory.items()},
                                   error)
            if key in cpu_entries or (alloc is not None and alloc.cpus) or (mem_entries and key in mem_entries):
                out.append(check)
    return out


def _alternatives(k: KubeletConfig) -> Iterable[tuple[str, KubeletConfig]]:
    """One-setting changes of the node's kubelet configuration."""
    options = k.cpu_manager_options.to_dict()
    for name in CPU_OPTIONS:
        changed = dict(options)
        if name in changed:
            del changed[name]
            label = f"without the static policy option {name}"
        else:
            changed[name] = "true"
            label = f"with the static policy option {name}"
        try:
            yield label, dataclasses.replace(k, cpu_manager_options=CPUOptions.parse(changed))
        except EngineError:  # an option combination the kubelet refuses is no candidate
            continue
    for policy in TOPOLOGY_POLICIES:
        if policy != k.topology_manager_policy:
            yield f"with topology manager policy {policy}", dataclasses.replace(k, topology_manager_policy=policy)
    for scope in TOPOLOGY_SCOPES:
        if scope != k.topology_manager_scope:
            yield f"with topology manager scope {scope}", dataclasses.replace(k, topology_manager_scope=scope)


def check_state(node: Node, cpu_state: str, memory_state: str | None = None,
                pods: Sequence[Pod] | None = None, config: KubeletConfig | None = None,
                memory_reservation: Mapping[str, int] | None = None,
                max_containers: int | None = None) -> StateCheck:
    """Compare the kubelet's state files of `node` with the model's replay (see the module docstring)
    and say whether a kubelet with `config` (default: the node's settings; `memory_reservation` from its
    KubeletConfiguration) would start with them. `node` gives the topology and kubelet settings; its own
    allocations are not used. More than `max_containers` containers in a state file or in `pods` is a
    FormatError naming that input (`cpu_state`, `memory_state`, `pods`), raised before any replay: the
    replay (several, when the policy options are searched) costs about half a millisecond a container."""
    cpu = parse_cpu(cpu_state)
    mem = parse_memory(memory_state) if memory_state is not None else None
    mem_entries = mem["entries"] if mem is not None else None
    if max_containers is not None:
        _bounded(len(cpu["entries"]), max_containers, "cpu_manager_state", "cpu_state")
        _bounded(len(mem_entries or ()), max_containers, "memory_manager_state", "memory_state")
        _bounded(sum(1 for p in pods or () for _c in p.all_containers()), max_containers, "pods", "pods")
    if pods is None:
        pods, order = _state_pods(cpu["entries"], mem_entries or {})
    else:
        pods, order = list(pods), "pods as given"
        if cpu["layout"] == "v1":
            raise FormatError("cpu_manager_state: the v1 layout names containers by id, not pods; check it "
                              "without pods")
    result = StateCheck(node.name, cpu["policy"], order)
    if not node.kubelet.static_cpus:
        result.reasons.append(f"the node's CPU Manager policy is {node.kubelet.cpu_manager_policy}, so the model "
                              "pins no CPUs; set it to static to compare")
    result.containers = _run(node, pods, cpu["entries"], mem_entries)
    assigned = CPUSet()
    for cpus in cpu["entries"].values():
        assigned |= cpus
    result.actual_default = cpu["default"]
    result.predicted_default = _shared_pool(node, assigned)
    outside = (assigned | cpu["default"]) - CPUSet(node.topology.all_cpus)
    if outside:
        result.reasons.append(f"CPUs {outside} are not on this node's topology (a state file of another machine?)")
    if cpu["policy"] != node.kubelet.cpu_manager_policy:
        result.reasons.append(f"the state file was written by the {cpu['policy']} CPU Manager policy, the node is "
                              f"set to {node.kubelet.cpu_manager_policy}")
    if result.mismatches and not outside:
        matching = _matching_alternatives(node, pods, cpu["entries"], mem_entries)
        if matching:
            result.reasons.append("the state file was written under another policy option: the replay matches "
                                  f"every container {' or '.join(matching)}")
    for c in result.mismatches:
        c.why = c.error or _why(node, c)
    planned = config or node.kubelet
    result.planned = changed_settings(node.kubelet, planned)
    result.start = kubelet_start(node.topology, planned, cpu_state, memory_state,
                                 memory_reservation=memory_reservation)
    if result.actual_default != result.predicted_default and not outside:
        result.reasons.append(f"defaultCpuSet is {result.actual_default}, the model's shared pool "
                              f"{result.predicted_default}")
    return result


def _bounded(count: int, limit: int, what: str, field: str) -> None:
    if count > limit:
        raise FormatError(f"{what}: {count} containers, more than the limit of {limit} containers a check "
                          "replays", field)


def _shared_pool(node: Node, assigned: CPUSet) -> CPUSet:
    """The shared pool the model expects beside the assigned CPUs: none under the none policy, and
    without the reserved CPUs under strict-cpu-reservation."""
    pool = node.topology.all_cpus & ~assigned.mask if node.kubelet.static_cpus else 0
    if node.kubelet.cpu_manager_options.strict_cpu_reservation:
        pool &= ~node.reserved_cpus.mask
    return CPUSet(pool)


def _matching_alternatives(node: Node, pods: Sequence[Pod], cpu_entries: CPUEntries,
                           mem_entries: MemoryEntries | None) -> list[str]:
    """The other policy settings under which the replay matches every container of the files."""
    matching = []
    for label, config in _alternatives(node.kubelet):
        try:
            alt = _run(Node(node.name, node.topology, config), pods, cpu_entries, mem_entries)
        except EngineError:  # a setting the engine refuses for this node is no candidate
            continue
        if alt and all(c.match for c in alt):
            matching.append(label)
    return matching


def _why(node: Node, c: ContainerCheck) -> str:
    numa_of = {cpu.id: cpu.numa for cpu in node.topology.cpus}

    def numas(cpus: CPUSet) -> str:
        return ",".join(str(n) for n in sorted({numa_of.get(x, -1) for x in cpus})) or "-"

    if c.actual_cpus != c.predicted_cpus:
        if len(c.actual_cpus) != len(c.predicted_cpus):
            return (f"holds {len(c.actual_cpus)} CPUs, the model gives {len(c.predicted_cpus)} "
                    "(a request the state file does not show?)")
        if numas(c.actual_cpus) != numas(c.predicted_cpus):
            return f"actual CPUs on NUMA {numas(c.actual_cpus)}, predicted on NUMA {numas(c.predicted_cpus)}"
        return f"same NUMA nodes ({numas(c.actual_cpus)}), other CPUs: {c.actual_cpus - c.predicted_cpus} " \
               f"instead of {c.predicted_cpus - c.actual_cpus}"
    return "memory blocks differ"
