"""Pods the kubelet rejected, explained after the fact and given their cheapest way out (IMPORT.md §1,
"Pods the kubelet rejected").

`explain_rejection(node, pod, reason)`: the kubelet's admission replayed on `node` in the state given
(its allocations and settings, `admit_pod` with commit=False): every provider's hints, the merged hint
and the policy's verdict, plus one sentence naming the resource and the NUMA nodes that made it fail.
A replay that admits the pod, or rejects it for another reason, is reported as not reproduced: the
sentence then says what the replay saw, never a guessed reason.

`Remedies(cluster).find(node, pod)`: ways out, each checked by the engine before it is offered:
- `other-node`: nodes where the same pod is admitted now (nodes in the same state form one class and
  are admitted once; the cluster's resource fit first, as the scheduler filters);
- `make-room`: the fewest moves after which it is admitted (`room.make_room`, whose plans are carried
  out on a copy before they are returned), looked for only when no node admits it now;
- `setting`: a Topology Manager policy, scope or option, or a CPU Manager option, changed on this node
  under which the pod is admitted, with whether the kubelet starts with it and the node's current
  checkpoints (`kubelet_start`, the state check's model).
Ranked by cost: (pods disturbed, kubelet restarts, CPUs moved).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..errors import EngineError
from ..kubelet.admission import AdmitResult, Decision, admit_pod
from ..kubelet.kubelet_start import kubelet_start, model_checkpoints
from ..model.bitmask import bits_of
from ..model.kubelet_config import TOPOLOGY_POLICIES, TOPOLOGY_SCOPES, KubeletConfig, TopologyOptions
from ..model.node import Node
from ..model.pods import Container, Pod, guaranteed_cpus, is_device_resource, pod_guaranteed_cpus, pod_level
from ..model.quantity import format_bytes
from .cluster import Cluster, Request
from .explain import PodStatus
from .room import make_room
from .room_moves import shape_job

OTHER_NODE, MAKE_ROOM, SETTING = "other-node", "make-room", "setting"
_POLICY_NEEDS = {
    "single-numa-node": "single-numa-node admits only one NUMA node for all of them",
    "restricted": "restricted admits only the narrowest (preferred) alignment",
    "best-effort": "best-effort admits any alignment",
    "none": "policy none merges no hints",
}


class ExplanationDict(TypedDict):
    reproduced: bool
    sentence: str
    replay_reason: str | None
    resource: str | None
    numa: list[int]
    admission: dict[str, Any]


@dataclass
class Explanation:
    """The replay's verdict (`admission`), whether it reproduces the recorded reason, and the sentence."""

    reproduced: bool
    sentence: str
    admission: AdmitResult | None
    resource: str | None = None
    numa: int = 0  # NUMA mask the sentence names

    def to_dict(self) -> ExplanationDict:
        adm = self.admission
        return {"reproduced": self.reproduced, "sentence": self.sentence,
                "replay_reason": None if adm is None else adm.reason, "resource": self.resource,
                "numa": bits_of(self.numa), "admission": {} if adm is None else adm.to_dict()}


def _numa_list(mask: int) -> str:
    ids = bits_of(mask)
    return "NUMA " + (", ".join(map(str, ids[:-1])) + " and " + str(ids[-1]) if len(ids) > 1 else str(ids[0]))


def _request_of(resource: str) -> Callable[[Container], int]:
    def amount(c: Container) -> int:
        return c.limits.get(resource, 0) if is_device_resource(resource) else c.memory_requests().get(resource, 0)
    return amount


def _wants(pod: Pod, container: Container | None) -> dict[str, int]:
    """What the container (None: the pod) asks the aligned managers for, by resource."""
    if container is None:
        out = {"cpu": pod_guaranteed_cpus(pod)}
        names = {r for c in pod.all_containers() for r in c.limits if is_device_resource(r)}
        names |= {r for c in pod.all_containers() for r in c.memory_requests()}
        for r in names:
            out[r] = pod_level(pod, _request_of(r))
        return out
    return {"cpu": guaranteed_cpus(pod, container), **container.memory_requests(), **container.device_requests()}


def _free(node: Node, resource: str, numa: int) -> int:
    """What the node has free of `resource` on one NUMA node (CPUs, bytes or devices)."""
    if resource == "cpu":
        return (node.free_cpus & node.topology.numa_cpus[numa]).bit_count()
    if is_device_resource(resource):
        free = set(node.free_devices(resource))
        return sum(1 for d in node.topology.devices
                   if d.resource == resource and d.id in free and numa in (d.numa or ()))
    return node.memory_free(numa, resource)


def _amount(resource: str, n: int) -> str:
    if resource == "cpu":
        return f"{n} CPU{'s' if n != 1 else ''}"
    if is_device_resource(resource):
        return f"{n} {resource}"
    return f"{format_bytes(n)} of {resource}"


def _narrowest(hints: Iterable[Any]) -> int:
    """NUMA nodes where a resource fits narrowest: the union of its preferred hints' affinities."""
    mask = 0
    for h in hints:
        if h.preferred and h.affinity is not None:
            mask |= h.affinity
    return mask


def _affinity_sentence(node: Node, pod: Pod, decision: Decision, scope_pod: bool) -> tuple[str, str | None, int]:
    """The failed merge in words: where each resource fits alone, what the others lack there."""
    container = None if decision.container is None else next(
        (c for c in pod.all_containers() if c.name == decision.container), None)
    who = "the pod" if container is None else f"container {container.name}"
    wants = _wants(pod, container)
    all_numa = sum(1 << n for n in node.topology.numa_ids)
    fits = {r: _narrowest(hs) for r, hs in decision.hints.items() if hs is not None}
    parts: list[str] = []
    named = 0
    # the most constrained resource first: devices before CPUs before memory on a tie
    order = sorted(fits, key=lambda r: (fits[r].bit_count() if fits[r] else 99, r == "cpu", r))
    if not order:
        return f"{who}: no provider gave a hint", None, 0
    anchor = order[0]
    where = fits[anchor]
    policy = node.kubelet.topology_manager_policy
    scope = "pod" if scope_pod else node.kubelet.topology_manager_scope
    needs = f"{_POLICY_NEEDS.get(policy, policy)} ({scope} scope)"
    amount = _amount(anchor, wants.get(anchor, 0))
    if where.bit_count() != 1:  # no single NUMA node can give it: say what each has
        free = ", ".join(f"NUMA {n} has {_amount(anchor, _free(node, anchor, n))} free" for n in node.topology.numa_ids)
        together = f"; together they fit on {_numa_list(where)}" if where else ""
        return f"{who} wants {amount}, which no single NUMA node has free ({free}){together}; {needs}", anchor, \
            where or all_numa
    only = "only " if where != all_numa else ""
    parts.append(f"{amount} {'fit' if anchor == 'cpu' else 'is free'} {only}on {_numa_list(where)}")
    named |= where
    lacking = [r for r in order[1:] if not fits[r] & where]
    for r in lacking:
        for n in bits_of(where):
            parts.append(f"NUMA {n} has {_amount(r, _free(node, r, n))} free, "
                         f"{who} wants {_amount(r, wants.get(r, 0))}")
        if fits[r]:
            parts.append(f"{r} fits {'only ' if fits[r] != all_numa else ''}on {_numa_list(fits[r])}")
            named |= fits[r]
    resource = " + ".join([anchor, *lacking]) if lacking else anchor
    return f"{'; '.join(parts)}; {needs}", resource, named


def _smt_sentence(node: Node, pod: Pod, result: AdmitResult) -> tuple[str, str, int]:
    topo = node.topology
    per_numa = {n: 0 for n in topo.numa_ids}
    for core in topo.core_cpus.values():
        if core & node.free_cpus == core:
            for n, cpus in topo.numa_cpus.items():
                if core & cpus:
                    per_numa[n] += core.bit_count()
    container = result.error.container if result.error is not None else None
    c = next((c for c in pod.all_containers() if c.name == container), None)
    want = pod_guaranteed_cpus(pod) if c is None else guaranteed_cpus(pod, c)
    per_core = max((m.bit_count() for m in topo.core_cpus.values()), default=1)
    free = ", ".join(f"NUMA {n} has {k} free CPUs on whole cores" for n, k in sorted(per_numa.items()))
    who = "the pod" if c is None else f"container {c.name}"
    return (f"full-pcpus-only: {who} wants {want} CPUs and this machine has {per_core} threads per core, so only "
            f"whole free cores can be given ({free})", "cpu", sum(1 << n for n in per_numa))


def _unexpected_sentence(node: Node, pod: Pod, result: AdmitResult) -> tuple[str, str | None, int]:
    err = result.error
    assert err is not None
    c = next((c for c in pod.all_containers() if c.name == err.container), None)
    wants = _wants(pod, c)
    resource = err.resource
    if resource is None:  # the device manager reports no resource of its own: the one its text names
        resource = next((r for r in wants if is_device_resource(r) and r in err.message), None)
    if resource is None or resource not in wants:
        return f"{err.message} (the model names no resource)", resource, 0
    who = "the pod" if c is None else f"container {c.name}"
    free = ", ".join(f"NUMA {n} has {_amount(resource, _free(node, resource, n))} free" for n in node.topology.numa_ids)
    return (f"{resource}: {who} wants {_amount(resource, wants[resource])}; {free}",
            resource, sum(1 << n for n in node.topology.numa_ids))


def as_rejected_on(node: Node, reason: str) -> tuple[Node, str]:
    """The node to replay a rejection on, and a note when it differs from `node`: an SMTAlignmentError
    is only raised under `full-pcpus-only`, an option no snapshot object states, so the option is known
    to be on and the replay adds it."""
    options = node.kubelet.cpu_manager_options
    if reason != "SMTAlignmentError" or options.full_pcpus_only or not node.kubelet.static_cpus:
        return node, ""
    try:
        changed = with_settings(node, dataclasses.replace(
            node.kubelet, cpu_manager_options=dataclasses.replace(options, full_pcpus_only=True)))
    except EngineError:
        return node, ""
    return changed, ("the snapshot does not state the CPU Manager's options; an SMTAlignmentError is only raised "
                     "under full-pcpus-only, so the replay has it on")


def explain_rejection(node: Node, pod: Pod, reason: str) -> Explanation:
    """Replay the kubelet's admission of `pod` on `node` as it stands and explain the rejection recorded
    with `reason` (see the module docstring); `node` is not changed."""
    try:
        result = admit_pod(node, pod, commit=False)
    except EngineError as exc:  # the node's settings would not let its kubelet start
        return Explanation(False, f"not reproduced: the replay cannot run on {node.name}: {exc}", None)
    if result.admitted:
        mask = node.numa_mask_of(result.allocations)
        where = f" (CPUs {result.cpus or 'from the shared pool'}{', ' + _numa_list(mask) if mask else ''})"
        return Explanation(False, f"not reproduced: the replay admits this pod on {node.name} now{where}; the "
                                  "node's state has changed since the kubelet rejected it, or the kubelet saw "
                                  "something the model does not have", result, None, mask)
    err = result.error
    assert err is not None
    if err.reason == "TopologyAffinityError":
        failed = next((d for d in reversed(result.decisions) if d.merge is not None and not d.merge.admit), None)
        if failed is None:
            sentence, resource, numa = err.message, err.resource, 0
        else:
            sentence, resource, numa = _affinity_sentence(node, pod, failed, failed.container is None)
    elif err.reason == "SMTAlignmentError":
        sentence, resource, numa = _smt_sentence(node, pod, result)
    else:
        sentence, resource, numa = _unexpected_sentence(node, pod, result)
    if err.reason != reason:
        return Explanation(False, f"not reproduced as recorded: the kubelet said {reason}, the replay rejects it "
                                  f"with {err.reason} ({err.message}): {sentence}", result, resource, numa)
    return Explanation(True, sentence, result, resource, numa)


# -- remedies ------------------------------------------------------------------------------------------


class RemedyDict(TypedDict):
    kind: str
    cost: list[int]
    viable: bool
    summary: str
    detail: dict[str, Any]


@dataclass
class Remedy:
    """One checked way out; `cost` is (pods disturbed, kubelet restarts, CPUs moved). A setting the
    kubelet would not start with (`viable` False) is listed after every viable remedy."""

    kind: str
    cost: tuple[int, int, int]
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)
    viable: bool = True

    @property
    def rank(self) -> tuple[bool, int, int, int]:
        return (not self.viable, *self.cost)

    def to_dict(self) -> RemedyDict:
        return {"kind": self.kind, "cost": list(self.cost), "viable": self.viable, "summary": self.summary,
                "detail": self.detail}


def _setting_candidates(k: KubeletConfig) -> list[tuple[str, KubeletConfig]]:
    """Single changes to the NUMA settings of `k` worth trying, as (what changes, the new settings)."""
    out: list[tuple[str, KubeletConfig]] = []

    def add(what: str, **changes: Any) -> None:
        with contextlib.suppress(EngineError):  # a combination the kubelet refuses to parse is no remedy
            out.append((what, dataclasses.replace(k, **changes)))

    for scope in TOPOLOGY_SCOPES:
        if scope != k.topology_manager_scope:
            add(f"topologyManagerScope: {scope}", topology_manager_scope=scope)
    opts = k.topology_manager_options
    if not opts.prefer_closest_numa_nodes and k.topology_manager_policy in ("best-effort", "restricted"):
        add("topologyManagerPolicyOptions: prefer-closest-numa-nodes=true",
            topology_manager_options=TopologyOptions(True, opts.max_allowable_numa_nodes))
    cpu = k.cpu_manager_options
    for name in ("full-pcpus-only", "align-by-socket", "distribute-cpus-across-numa"):
        attr = name.replace("-", "_")
        if getattr(cpu, attr):
            add(f"cpuManagerPolicyOptions: {name} removed",
                cpu_manager_options=dataclasses.replace(cpu, **{attr: False}))
    # looser policies last: they give up alignment for every pod of the node
    for policy in ("restricted", "best-effort", "none"):
        if policy != k.topology_manager_policy and TOPOLOGY_POLICIES.index(policy) < TOPOLOGY_POLICIES.index(
                k.topology_manager_policy):
            add(f"topologyManagerPolicy: {policy}", topology_manager_policy=policy)
    return out


def with_settings(node: Node, kubelet: KubeletConfig) -> Node:
    """`node` under other kubelet settings, its allocations kept (raises EngineError when they no longer fit)."""
    return Node(node.name, node.topology, kubelet, node.allocations, node.numatopology, node.labels)


class Remedies:
    """Remedies on one cluster state; nodes are grouped into classes once (equal state, equal fit) so
    many pods can be looked at against the same cluster cheaply."""

    def __init__(self, cluster: Cluster, max_nodes: int = 5, make_room_time: float = 2.0) -> None:
        self.cluster, self.max_nodes, self.make_room_time = cluster, max_nodes, make_room_time
        classes: dict[Hashable, list[str]] = {}
        for name, node in cluster.nodes.items():
            classes.setdefault((node.state_key(), cluster.tally[name].key()), []).append(name)
        # the largest classes first (a pool's empty nodes): the likeliest to admit, and many names at once
        self.classes = sorted(classes.values(), key=lambda names: (-len(names), names[0]))
        #: one empty node per machine shape and settings (what `fits_empty` admits on)
        self.shapes = list({(n.topology.fingerprint, n.kubelet): n for n in cluster.nodes.values()}.values())

    def other_nodes(self, pod: Pod, exclude: str) -> Remedy | None:
        """Nodes (other than `exclude`) where the kubelet admits `pod` now: `count` of them in the node
        classes tried, the first `max_nodes` named; the search stops once that many are found
        (`complete` False: there may be more)."""
        req = Request.of(pod)
        found: list[str] = []
        count, complete = 0, True
        for names in self.classes:
            if len(found) >= self.max_nodes:
                complete = False
                break
            first = next((n for n in names[:2] if n != exclude), None)
            if first is None or self.cluster.fit(first, req) is not None:
                continue
            if admit_pod(self.cluster.nodes[first], pod, commit=False).admitted:
                found.extend(n for n in names[:self.max_nodes + 1] if n != exclude)
                count += len(names) - (exclude in names)
        if not found:
            return None
        shown = found[:self.max_nodes]
        how_many = f"{count}{'' if complete else ' or more'} other node(s)"
        listed = ", ".join(shown) + (", …" if count > len(shown) else "")
        return Remedy(OTHER_NODE, (0, 0, 0), f"admitted now on {how_many}: {listed}",
                      {"nodes": shown, "count": count, "complete": complete})

    def fits_empty(self, pod: Pod) -> bool:
        """Whether some node of the cluster, emptied, admits `pod` (else no move can make room for it);
        one admission per machine shape and settings."""
        return any(admit_pod(Node(n.name, n.topology, n.kubelet), pod, commit=False).admitted for n in self.shapes)

    def make_room(self, pod: Pod) -> Remedy | None:
        """The fewest moves after which the kubelet admits `pod` somewhere (`room.make_room`, verified)."""
        if not self.fits_empty(pod):
            return None
        job = shape_job(pod, 1, None, pod.namespace)
        try:
            plan = make_room(self.cluster, job, "aligned", time_limit=self.make_room_time, max_checks=50)
        except EngineError:
            return None
        if not plan.found or plan.check is None or plan.check.result is None or plan.evictions:
            return None
        placed = [p.node for p in plan.check.result.pods if p.status == PodStatus.ADMITTED]
        if not placed or placed[0] is None:
            return None
        moves = [m.to_dict(self.cluster) for m in plan.moves]
        text = ", ".join(f"{m['namespace']}/{m['pod']} {m['from_node']} → {m.get('to_node')}" for m in moves)
        return Remedy(MAKE_ROOM, (len(moves), 0, plan.moved_cpus),
                      f"admitted on {placed[0]} after {len(moves)} move(s){'' if plan.minimal else ' (fewest found)'}"
                      f": {text}", {"node": placed[0], "moves": moves, "minimal": plan.minimal})

    def settings(self, node: Node, pod: Pod) -> list[Remedy]:
        """Setting changes on `node` under which its kubelet admits `pod`, each with its start-up verdict."""
        out = []
        checkpoints = model_checkpoints(node)
        for what, kubelet in _setting_candidates(node.kubelet):
            try:
                changed = with_settings(node, kubelet)
                if not admit_pod(changed, pod, commit=False).admitted:
                    continue
            except EngineError:
                continue
            verdict = kubelet_start(node.topology, kubelet, *checkpoints)
            moved = len(verdict.pods_to_move)
            refusal = verdict.refusal
            if verdict.starts:
                start = "the kubelet starts with it"
            elif refusal is not None and refusal.file is not None:
                start = (f"the kubelet refuses its checkpoint ({refusal.message}): drain the node, delete "
                         f"{refusal.file}, restart; {moved} pod(s) leave the node")
            else:
                start = f"the kubelet would not start with it ({refusal.message if refusal else 'refused'})"
            out.append(Remedy(SETTING, (moved, 1, 0), f"{what} on {node.name}: admitted; {start}",
                              {"node": node.name, "change": what, "kubelet": kubelet.to_dict(),
                               "starts": verdict.starts, "start": verdict.to_dict()["summary"],
                               "pods_to_move": verdict.pods_to_move},
                              viable=verdict.starts or (refusal is not None and refusal.file is not None)))
        return out

    def find(self, node: Node, pod: Pod) -> list[Remedy]:
        """Every remedy found for `pod` rejected on `node`, cheapest first."""
        out: list[Remedy] = []
        elsewhere = self.other_nodes(pod, node.name)
        if elsewhere is not None:
            out.append(elsewhere)
        elif self.make_room_time > 0:
            room = self.make_room(pod)
            if room is not None:
                out.append(room)
        if not admit_pod(node, pod, commit=False).admitted:  # a node that admits it now needs no change
            out.extend(self.settings(node, pod))
        return sorted(out, key=lambda r: r.rank)


__all__ = ["Explanation", "Remedies", "Remedy", "as_rejected_on", "explain_rejection", "with_settings"]
