"""Koordinator's NodeNUMAResource plugin over one session: PreFilter (the pod's reading), Filter
(NUMA topology policy match, CPU bind policy checks, the NUMA topology manager's admission),
Score (the scoring strategy over the zones the pod would use), Reserve / Unreserve (the CPUs and
NUMA amounts taken, held by the plugin's resource manager so the next pod sees them).

Upstream keeps the NUMA affinity the Filter found per node in the cycle state and reuses it in
Reserve; here `filter` returns it in its `Status` and `reserve` takes it back."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..model.node import KOORD_CPU_BIND_POLICY, KOORD_NUMA_TOPOLOGY_POLICY, Node
from ..model.pods import Container, Pod, pod_level
from .allocation import (
    SPREAD_BY_PCPUS,
    AllocateError,
    NodeAllocation,
    NodeOptions,
    PodAllocation,
    Request,
    Resources,
    allocate,
    least_allocated,
    topology_hints,
)
from .cpu_accumulator import FULL_PCPUS, MOST_ALLOCATED, CPUInfo, CPUTopology
from .hints import BEST_EFFORT, EXCLUSIVE_REQUIRED, POLICIES, RESTRICTED, SINGLE_NUMA_NODE, merge

# upstream's Filter reasons
NOT_MATCH_NUMA_TOPOLOGY = "node(s) NUMA Topology policy not match"
INVALID_REQUESTED_CPUS = "the requested CPUs must be integer"
INVALID_CPU_TOPOLOGY = "node(s) invalid CPU Topology"
SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"
CPU_BIND_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
MISSING_NUMA_RESOURCES = "node(s) missing NUMA resources"
#: not upstream's: its topology manager has no policy for any other value (a node label or pod spec may
#: hold one: neither is checked) and its scheduler fails on the nil policy; the model refuses the node
UNKNOWN_NUMA_POLICY = "node(s) NUMA Topology policy {!r} is none of BestEffort, Restricted, SingleNUMANode"
UNSCHEDULABLE, UNRESOLVABLE = "Unschedulable", "UnschedulableAndUnresolvable"

# pod and node labels / annotations the plugin reads
QOS_LABEL = "koordinator.sh/qosClass"
PRIORITY_LABEL = "koordinator.sh/priority-class"
RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
#: the fields of the resource and NUMA topology specs the plugin reads (strings upstream)
_SPEC_FIELDS = frozenset({"preferredCPUBindPolicy", "requiredCPUBindPolicy", "preferredCPUExclusivePolicy",
                          "numaTopologyPolicy", "singleNUMANodeExclusive"})
FULL_PCPUS_ONLY, NODE_SPREAD_BY_PCPUS = "FullPCPUsOnly", "SpreadByPCPUs"
#: NRT topologyPolicies the plugin maps to its own policies (convertToNUMATopologyPolicy)
NRT_POLICIES = {"BestEffort": BEST_EFFORT, "Restricted": RESTRICTED, "SingleNUMANodePodLevel": SINGLE_NUMA_NODE}
#: the kubelet policy and scope as koordlet publishes them in the NRT's topologyPolicies
KOORDLET_POLICIES = {("single-numa-node", "container"): "SingleNUMANodeContainerLevel",
                     ("restricted", "container"): "RestrictedContainerLevel",
                     ("best-effort", "container"): "BestEffortContainerLevel",
                     ("single-numa-node", "pod"): "SingleNUMANodePodLevel",
                     ("restricted", "pod"): "RestrictedPodLevel",
                     ("best-effort", "pod"): "BestEffortPodLevel"}


@dataclass(frozen=True)
class Status:
    """A Filter / Reserve outcome: `code` None when it passes; `hint` the NUMA affinity admitted
    (None: no affinity, the pod is not NUMA-bound)."""

    code: str | None = None
    reason: str = ""
    hint: int | None = None

    @property
    def ok(self) -> bool:
        return self.code is None


PASS = Status()


@dataclass(frozen=True)
class PodState:
    """preFilterState: the pod's requests (cpu in millicores) and what it asks of CPU binding and NUMA."""

    requests: tuple[tuple[str, int], ...] = ()
    num_cpus: int = 0
    skip: bool = False
    cpu_bind: bool = False
    required_bind: str = ""
    preferred_bind: str = ""
    exclusive: str = ""
    numa_policy: str = ""
    numa_exclusive: str = ""
    error: str = ""

    @property
    def cpu_milli(self) -> int:
        for r, v in self.requests:
            if r == "cpu":
                return v
        return 0



def _json(meta: Mapping[str, str], key: str) -> dict[str, str]:
    """An annotation's JSON object ({} when absent); ValueError naming the annotation when it is not JSON."""
    text = meta.get(key)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"invalid {key} annotation: {exc}") from None
    if not isinstance(value, dict):
        return {}
    for field in _SPEC_FIELDS.intersection(value):
        if not isinstance(value[field], str):  # Go's unmarshalling into a string field fails
            raise ValueError(f"invalid {key} annotation: {field} must be a string, not {value[field]!r:.40}")
    return value


def priority_class(meta: Mapping[str, str], priority: int | None) -> str:
    """GetPodPriorityClassWithDefault: the label, else the class of spec.priority's range, else by QoS."""
    label = meta.get(PRIORITY_LABEL, "")
    if label:
        return label
    if priority is not None:
        for name, low in (("koord-prod", 9000), ("koord-mid", 7000), ("koord-batch", 5000), ("koord-free", 3000)):
            if low <= priority <= low + 999:
                return name
    qos = meta.get(QOS_LABEL, "")
    return "koord-prod" if qos in ("LSE", "LSR", "LS", "SYSTEM") else "koord-batch" if qos == "BE" else ""


def pre_filter(requests: Mapping[str, int], meta: Mapping[str, str], default_bind: str = FULL_PCPUS,
               priority: int | None = None) -> PodState:
    """PreFilter: `meta` holds the pod's labels and annotations (their keys do not collide),
    `priority` its spec.priority."""
    reqs = tuple(sorted((r, v) for r, v in requests.items() if v))
    if not reqs:
        return PodState(skip=True)
    try:  # upstream's PreFilter fails the pod with the parse error
        spec, numa = _json(meta, RESOURCE_SPEC), _json(meta, NUMA_TOPOLOGY_SPEC)
    except ValueError as exc:
        return PodState(reqs, error=str(exc))
    state = PodState(reqs, dict(reqs).get("cpu", 0) // 1000, numa_policy=numa.get("numaTopologyPolicy", ""),
                     numa_exclusive=numa.get("singleNUMANodeExclusive", ""))
    if meta.get(QOS_LABEL, "") in ("LSE", "LSR") and priority_class(meta, priority) == "koord-prod":
        bind = spec.get("preferredCPUBindPolicy", "")
        if bind in ("", "Default"):
            bind = default_bind
        required = spec.get("requiredCPUBindPolicy", "")
        if required == "Default":
            required = default_bind
        if required:
            bind = required
        if bind in (FULL_PCPUS, SPREAD_BY_PCPUS):
            milli = state.cpu_milli
            if milli % 1000:
                return PodState(reqs, state.num_cpus, error=INVALID_REQUESTED_CPUS)
            if milli > 0:
                return PodState(reqs, state.num_cpus, cpu_bind=True, required_bind=required, preferred_bind=bind,
                                exclusive=spec.get("preferredCPUExclusivePolicy", ""),
                                numa_policy=state.numa_policy, numa_exclusive=state.numa_exclusive)
    return state


def pod_requests(pod: Pod) -> dict[str, int]:
    """resourceapi.PodRequests: per resource, the larger of the app containers' sum and any init container."""
    names = sorted({r for c in pod.all_containers() for r in c.requests})
    return {r: pod_level(pod, _request_of(r)) for r in names}


def _request_of(resource: str) -> Callable[[Container], int]:
    return lambda c: c.requests.get(resource, 0)


def node_bind_policy(label: str, static_full_pcpus_only: bool) -> str:
    """GetNodeCPUBindPolicy: the node's label, or FullPCPUsOnly when the kubelet's static policy has
    full-pcpus-only."""
    if label == FULL_PCPUS_ONLY or static_full_pcpus_only:
        return FULL_PCPUS_ONLY
    return NODE_SPREAD_BY_PCPUS if label == NODE_SPREAD_BY_PCPUS else "None"


def cpu_topology(node: Node) -> CPUTopology:
    """The node's CPU topology as koordlet reports it (one per node shape: callers share it)."""
    return CPUTopology({c.id: CPUInfo(c.socket, c.numa, c.core) for c in node.topology.cpus})


def node_numa_policy(label: str, reported: str) -> str:
    """getNUMATopologyPolicy: the node's `node.koordinator.sh/numa-topology-policy` label when it is not
    empty (taken as it is written, unchecked), else the policy koordlet reports of the kubelet's."""
    return label or reported


def node_options(node: Node, topo: CPUTopology) -> NodeOptions:
    """The node as koordlet publishes it: its CPU topology `topo`, CPUs the kubelet holds or reserves
    as reserved, each zone's free cpu / memory / hugepages, the kubelet policies as NRT attributes;
    and the node's own labels, which override them (its NUMA topology and CPU bind policies)."""
    t = node.topology
    k = node.kubelet
    numa = {}
    for nid in sorted(t.numa_ids):
        zone = {"cpu": (t.numa_cpus[nid] & node.free_cpus).bit_count() * 1000}
        n = t.numa_node(nid)
        for name in ("memory", *n.hugepages):
            free = node.memory_free(nid, name)
            if free:
                zone[name] = free
        numa[nid] = zone
    reserved = frozenset(c for c in topo.details if not node.free_cpus >> c & 1)
    reported = NRT_POLICIES.get(KOORDLET_POLICIES.get((k.topology_manager_policy, k.topology_manager_scope), ""), "")
    policy = node_numa_policy(node.labels.get(KOORD_NUMA_TOPOLOGY_POLICY, ""), reported)
    full_only = k.cpu_manager_policy == "static" and k.cpu_manager_options.full_pcpus_only
    return NodeOptions(topo, numa, policy, node_bind_policy(node.labels.get(KOORD_CPU_BIND_POLICY, ""), full_only),
                       reserved)


class NodeNUMAResource:
    """The plugin over a set of nodes. `default_bind`: DefaultCPUBindPolicy; `scoring` and
    `numa_scoring`: the node and NUMA scoring strategies (LeastAllocated or MostAllocated)."""

    def __init__(self, nodes: Mapping[str, NodeOptions], default_bind: str = FULL_PCPUS,
                 scoring: str = "LeastAllocated", numa_scoring: str = "LeastAllocated") -> None:
        self.nodes = dict(nodes)
        self.allocs = {name: NodeAllocation() for name in nodes}
        self.default_bind = default_bind
        self.most = scoring == MOST_ALLOCATED
        self.numa_most = numa_scoring == MOST_ALLOCATED
        self.strategy = MOST_ALLOCATED if self.numa_most else "LeastAllocated"
        self.placed: dict[str, str] = {}

    # -- helpers -----------------------------------------------------------------------------------
    def _policy(self, opts: NodeOptions, state: PodState) -> str | None:
        """The node's policy merged with the pod's (mergeTopologyPolicy); None when they conflict."""
        node = opts.numa_policy
        if node and state.numa_policy and node != state.numa_policy:
            return None
        return state.numa_policy or node

    @staticmethod
    def _bind(state: PodState, opts: NodeOptions) -> tuple[bool, Status]:
        """requestCPUBind: the pod's own, or the node's bind policy for an integral CPU request."""
        if state.cpu_bind:
            return True, PASS
        milli = state.cpu_milli
        if not milli:
            return False, PASS
        if opts.cpu_bind_policy not in ("", "None"):
            if milli % 1000:
                return False, Status(UNRESOLVABLE, INVALID_REQUESTED_CPUS)
            return True, PASS
        return False, PASS

    @staticmethod
    def _bind_policy(state: PodState, opts: NodeOptions) -> tuple[str, bool]:
        """getCPUBindPolicy: the policy the CPUs are taken by and whether it is required."""
        if state.required_bind:
            return state.required_bind, True
        if opts.cpu_bind_policy == NODE_SPREAD_BY_PCPUS:
            return SPREAD_BY_PCPUS, True
        if opts.cpu_bind_policy == FULL_PCPUS_ONLY:
            return FULL_PCPUS, True
        return state.preferred_bind, False

    def _request(self, state: PodState, opts: NodeOptions, cpu_bind: bool) -> Request:
        policy, required = self._bind_policy(state, opts)
        return Request(state.requests, state.num_cpus, cpu_bind, required, policy, state.exclusive)

    def _strategy(self, opts: NodeOptions) -> str:
        """GetNUMAAllocateStrategy: the node's label, else the plugin's default."""
        return opts.strategy or self.strategy

    def _allocate(self, state: PodState, name: str, uid: str, cpu_bind: bool, hint: int | None) -> Status:
        opts = self.nodes[name]
        try:
            allocate(opts, self.allocs[name], self._request(state, opts, cpu_bind), uid, hint, self._strategy(opts))
        except AllocateError as e:
            return Status(UNSCHEDULABLE, str(e))
        return Status(hint=hint)

    def admit(self, state: PodState, name: str, uid: str, policy: str, cpu_bind: bool) -> Status:
        """FilterByNUMANode → the NUMA topology manager's Admit: hints, merge, then allocate on the best."""
        opts = self.nodes[name]
        nodes = opts.numa_nodes
        if not nodes:
            return Status(UNRESOLVABLE, MISSING_NUMA_RESOURCES)
        if policy not in POLICIES:
            return Status(UNRESOLVABLE, UNKNOWN_NUMA_POLICY.format(policy))
        alloc = self.allocs[name]
        exclusive = state.numa_exclusive
        if not exclusive and state.numa_policy:
            exclusive = EXCLUSIVE_REQUIRED
        hints = topology_hints(opts, alloc, self._request(state, opts, cpu_bind), uid, policy,
                               self._strategy(opts), self.numa_most)
        best, admitted, reasons = merge(policy, nodes, [hints], exclusive, alloc.status(len(nodes)))
        if not admitted and reasons:
            return Status(UNSCHEDULABLE, ", ".join(reasons))
        return self._allocate(state, name, uid, cpu_bind, best.mask)

    # -- extension points --------------------------------------------------------------------------
    def filter(self, state: PodState, name: str, uid: str = "") -> Status:
        """Filter: PASS (with the admitted affinity) or upstream's code and reason."""
        if state.error:
            return Status(UNRESOLVABLE, state.error)
        if state.skip:
            return PASS
        opts = self.nodes[name]
        policy = self._policy(opts, state)
        if policy is None:
            return Status(UNRESOLVABLE, NOT_MATCH_NUMA_TOPOLOGY)
        cpu_bind, status = self._bind(state, opts)
        if not status.ok:
            return status
        if cpu_bind:
            if not opts.valid:
                return Status(UNRESOLVABLE, INVALID_CPU_TOPOLOGY)
            required = state.required_bind
            if opts.cpu_bind_policy == FULL_PCPUS_ONLY:
                required = FULL_PCPUS
            elif opts.cpu_bind_policy == NODE_SPREAD_BY_PCPUS:
                required = SPREAD_BY_PCPUS
            if state.required_bind and state.required_bind != required:
                return Status(UNRESOLVABLE, CPU_BIND_POLICY_CONFLICT)
            assert opts.cpu_topology is not None
            if required == FULL_PCPUS and state.num_cpus % opts.cpu_topology.cpus_per_core:
                return Status(UNRESOLVABLE, SMT_ALIGNMENT)
            if required and not policy:
                return self._allocate(state, name, uid, cpu_bind, None)
        if policy and policy != BEST_EFFORT:
            return self.admit(state, name, uid, policy, cpu_bind)
        return PASS

    def reserve(self, state: PodState, name: str, uid: str, affinity: int | None = None) -> Status:
        """Reserve: the pod's CPUs and NUMA amounts under the Filter's affinity (best-effort nodes are
        admitted here), recorded on the node so the next pod sees them."""
        if state.skip or state.error:
            return PASS
        opts = self.nodes[name]
        policy = self._policy(opts, state) or ""
        cpu_bind, status = self._bind(state, opts)
        if not status.ok:
            return status
        if policy == BEST_EFFORT:
            status = self.admit(state, name, uid, policy, cpu_bind)
            if not status.ok:
                return status
            affinity = status.hint
        if not cpu_bind and not policy:
            return PASS
        if cpu_bind and not opts.valid:
            return Status("Error", INVALID_CPU_TOPOLOGY)
        try:
            result = allocate(opts, self.allocs[name], self._request(state, opts, cpu_bind), uid, affinity,
                              self._strategy(opts))
        except AllocateError as e:
            return Status(UNSCHEDULABLE, str(e))
        self.record(name, result)
        return Status(hint=affinity)

    def record(self, name: str, result: PodAllocation) -> None:
        """resourceManager.Update: the allocation is held on the node."""
        self.allocs[name].release(result.uid, self.nodes[name].cpu_topology)
        self.allocs[name].add(result, self.nodes[name].cpu_topology)
        self.placed[result.uid] = name

    def unreserve(self, uid: str) -> None:
        name = self.placed.pop(uid, None)
        if name is not None:
            self.allocs[name].release(uid, self.nodes[name].cpu_topology)

    def score(self, state: PodState, name: str, uid: str, affinity: int | None,
              requested: Resources, allocatable: Resources) -> int:
        """Score: the scoring strategy over the node (`requested` by its pods and `allocatable`, as the
        scheduler's NodeInfo has them), or on a NUMA-policy node over the zones the pod would take,
        a bound pod's cpu counted as the node's bound CPUs. 0 when the pod cannot be allocated."""
        if state.skip or state.error:
            return 0
        opts = self.nodes[name]
        alloc = self.allocs[name]
        cpu_bind, status = self._bind(state, opts)
        if not status.ok or (cpu_bind and not opts.valid):
            return 0
        pod = dict(state.requests)
        if not self._policy(opts, state):
            return least_allocated(requested, allocatable, pod, most=self.most)
        try:
            result = allocate(opts, alloc, self._request(state, opts, cpu_bind), uid, affinity, self._strategy(opts))
        except AllocateError:
            return 0
        used: dict[str, int] = dict(requested)
        total: Resources = allocatable
        if result.numa:
            zone_total: dict[str, int] = {}
            used = {}
            for n, _r in result.numa:
                for r, v in opts.numa_resources.get(n, {}).items():
                    zone_total[r] = zone_total.get(r, 0) + v
                for r, v in alloc.numa.get(n, {}).items():
                    used[r] = used.get(r, 0) + v
            total = zone_total
        if result.cpus:
            used["cpu"] = len(alloc.cpus) * 1000
        return least_allocated(used, total, pod, most=self.most)
