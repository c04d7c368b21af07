"""Plain-data records that make every scheduling decision visible, and their JSON schema.

`SessionResult.to_dict()` (schema version 1; every value is JSON-serialisable, keys are stable) is
defined field by field in ENGINE.md §6; the TypedDicts below are its checked form.

Outcomes: `passed` = the node is eligible and the profile's check ran; `skipped` = eligible, but the
numa-aware plugin did not apply (non-Guaranteed pod, or no task policy on a node it ignores);
`filtered` = a filter rejected it with code Error/Unschedulable (policy mismatch, resource fit...);
`unschedulable` = topology alignment is impossible there (UnschedulableAndUnresolvable).

Size is bounded: nodes in the same state are one group (identical verdicts of several classes merge
too), each group lists at most `explain_names` names, a pod keeps at most `explain_groups` groups,
and verdict details are stored once in `verdicts` and shared by every pod that produced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter
from typing import TYPE_CHECKING, TypedDict, cast

from ..model.bitmask import bits_of as _bits
from ..model.cpuset import CPUSet
from ..volcano.numaaware import PASS_ASSIGNED

if TYPE_CHECKING:
    from ..kubelet.admission import AdmitResult, Decision
    from ..kubelet.topologymanager.hint import TopologyHint
    from ..kubelet.topologymanager.merge import MergeResult
    from ..model.node import Allocation
    from ..volcano.numaaware import CloseEntry, ContainerDict, PodMetaDict, Verdict
    from .claims import ClaimsDict

SCHEMA = "numaweb.session/1"


class Outcome(StrEnum):
    """A node's verdict for a pod (a group of nodes in the explanation)."""

    PASSED = "passed"
    SKIPPED = "skipped"
    FILTERED = "filtered"
    UNSCHEDULABLE = "unschedulable"


class PodStatus(StrEnum):
    """A pod's outcome in a session; the web stores and serves these same values."""

    ADMITTED = "admitted"
    REJECTED = "rejected"
    UNSCHEDULABLE = "unschedulable"
    ROLLED_BACK = "rolled_back"
    #: never set by a session: a caller committing its result marks a pod that already held resources
    SKIPPED = "skipped"


PASSED, SKIPPED, FILTERED, UNSCHEDULABLE = Outcome
#: read with the outcome strings of stored explanations too (a StrEnum member is its string as a key)
_RANK: dict[str, int] = {PASSED: 0, SKIPPED: 1, UNSCHEDULABLE: 2, FILTERED: 3}

#: a pod's explanation row: (verdict id, score, node count, first node names)
Row = tuple[int, int | None, int, tuple[str, ...]]
#: a verdict group as `PodRecord.groups` lists it: (verdict id, outcome, score, node count, names shown)
Group = tuple[int, Outcome, int | None, int, tuple[str, ...]]
#: a hashable value of ints and strings standing for a verdict's content (see `VerdictTable.signature`)
Key = tuple[object, ...]
#: what `PodRecord.groups` remembers per row object: (sort key, group, the row itself to keep its id)
_SeenRow = tuple[tuple[int, int, str], Group, Row]


# -- the JSON form (see the module docstring) ------------------------------------------------------


class VerdictDict(TypedDict):
    outcome: Outcome
    code: str | None
    reason: str | None
    numa_count: int
    numa: list[int]
    cpus: str
    order_dependent: bool
    containers: list[ContainerDict] | None
    admission: dict[str, object] | None


class PredictedDict(TypedDict):
    verdict: int
    numa: list[int]
    cpus: str
    order_dependent: bool


class GroupDict(TypedDict):
    verdict: int
    outcome: Outcome
    reason: str | None
    score: int | None
    node_count: int
    nodes: list[str]


class OmittedDict(TypedDict):
    groups: int
    nodes: int


class PodRecordDict(TypedDict):
    pod: str
    uid: str
    namespace: str
    job: str
    task: str
    policy: str
    qos: str
    status: PodStatus
    node: str | None
    score: int | None
    message: str | None
    predicted: PredictedDict | None
    admission: dict[str, object] | None
    kubelet_reason: str | None
    admitted_numa: list[int] | None
    allocations: list[dict[str, object]] | None
    outcomes: dict[Outcome, int]
    groups: list[GroupDict]
    groups_omitted: OmittedDict
    dra: ClaimsDict | None


class Counts(TypedDict):
    pods: int
    placed: int
    unplaced: int
    admitted: int
    topology_affinity_errors: int
    admission_errors: int
    rolled_back: int
    single_numa: int
    cpu_prediction_mismatches: int


class Timings(TypedDict):
    total_s: float
    evaluate_s: float
    admission_s: float
    pods_per_s: float | None
    evaluations: int
    class_visits: int
    us_per_pod_node: float | None


class JobResult(TypedDict):
    job: str
    namespace: str
    priority: int
    min_available: int
    pods: int
    placed: int
    held: int
    committed: bool


class CloseEntryDict(TypedDict):
    """`CloseEntry` with its CPUs as a cpuset string."""

    task_uid: str
    pod_meta: PodMetaDict
    node: str
    cpus: str


class SessionDict(TypedDict):
    schema: str
    profile: str
    weight: int
    nodes_total: int
    counts: Counts
    timings: Timings
    jobs: list[JobResult]
    pods: list[PodRecordDict]
    verdicts: dict[str, VerdictDict]
    volcano_close: list[CloseEntryDict]


def group_order(outcome: str, score: int | None, first_name: str) -> tuple[int, int, str]:
    """Where a verdict group is listed: passing before skipped before unschedulable before filtered,
    then highest score, then first node name; ties stay in the engine's order (sort stably)."""
    return (_RANK[outcome], -(score or 0), first_name)


def unavailable_message(reasons: dict[str, int]) -> str:
    """Volcano's FitErrors text: `0/N nodes are unavailable: <count> <reason>, ....` with N the
    number of nodes that recorded an error and the entries sorted as strings (so "10 x" < "3 y")."""
    n = sum(reasons.values())
    head = f"0/{n} nodes are unavailable"
    if not reasons:
        return head + "."
    entries = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"{head}: {', '.join(entries)}."


@dataclass
class NodeVerdict:
    """One pod shape on one node class: outcome, reason and the profile's evidence."""

    outcome: Outcome
    reason: str | None = None
    code: str | None = None
    volcano: Verdict | None = None  # volcano profile
    admission: AdmitResult | None = None  # aligned profile
    numa_count: int = 0
    numa_mask: int = 0
    cpus: int = 0
    #: the profile's score of this node alone (nrt: the plugin scores each node from its own zones),
    #: added to what `ProfileSession.scores` gives; None when the profile scores by NUMA count only
    score: int | None = None
    sig: int = -1

    @property
    def order_dependent(self) -> bool:
        """The predicted CPUs are one of several upstream could pick (Volcano's selection, Go map order)."""
        return self.volcano is not None and self.volcano.order_dependent

    def to_dict(self) -> VerdictDict:
        out: VerdictDict = {
            "outcome": self.outcome, "code": self.code, "reason": self.reason, "numa_count": self.numa_count,
            "numa": _bits(self.numa_mask), "cpus": str(CPUSet(self.cpus)),
            "order_dependent": self.order_dependent, "containers": None,
            "admission": None if self.admission is None else self.admission.to_dict()}
        if self.volcano is not None:
            out["containers"] = [c.to_dict() for c in self.volcano.containers]
        return out


def decision_key(d: Decision) -> Key:
    """An admission.Decision as a hashable value of ints and strings. Its repr was half of an aligned
    session, and hashing its hints as dataclasses still a third: each hint becomes one int here.
    Remembered by identity: an admission shared between pods (`Admissions`) hands each the same decisions."""
    entry = _DECISION_KEYS.get(id(d))
    if entry is None:
        if len(_DECISION_KEYS) >= _CODES_LIMIT:
            _DECISION_KEYS.clear()
        entry = _DECISION_KEYS[id(d)] = (_decision_key(d), d)
    return entry[0]


#: a decision's key by its id; an entry keeps its decision alive, so a matching id is the very same (immutable) one
_DECISION_KEYS: dict[int, tuple[Key, Decision]] = {}


def _decision_key(d: Decision) -> Key:
    merge = d.merge
    merge_key: Key | None = None
    if merge is not None:
        entry = _MERGE_KEYS.get(id(merge))
        if entry is None:
            if len(_MERGE_KEYS) >= _CODES_LIMIT:
                _MERGE_KEYS.clear()
            key = (_hint_code(merge.hint), merge.admit, merge.policy,
                   tuple((label, _hint_codes(hs)) for label, hs in merge.resource_hints), merge.numa_nodes,
                   merge.best_non_preferred)
            entry = _MERGE_KEYS[id(merge)] = (key, merge)
        merge_key = entry[0]
    return (d.container, tuple((r, None if hs is None else _hint_codes(hs)) for r, hs in d.hints.items()),
            merge_key)


#: a merge result's key by its id (the kubelet hands out one result per distinct merge); an entry keeps
#: its result alive, so a matching id is the very same, immutable, result
_MERGE_KEYS: dict[int, tuple[Key, MergeResult]] = {}


def _hint_code(h: TopologyHint) -> tuple[int]:
    """A hint as an int: affinity mask shifted left, preferred in bit 0; -1 for a nil affinity."""
    return (-1 if h.affinity is None else h.affinity << 1 | h.preferred,)


def _hint_codes(hints: Sequence[TopologyHint]) -> tuple[int, ...]:
    """Hints as `_hint_code` ints (one tuple). Remembered
    by the hints' identities: the kubelet's providers hand out shared hint objects, and a 255-hint list
    of an 8-NUMA machine comes back on every node in the same state."""
    key = tuple(map(id, hints))
    entry = _CODES.get(key)
    if entry is None:
        if len(_CODES) >= _CODES_LIMIT:
            _CODES.clear()
        codes = tuple(-1 if h.affinity is None else h.affinity << 1 | h.preferred for h in hints)
        entry = _CODES[key] = (codes, tuple(hints))
    return entry[0]


#: codes by the hints' ids; an entry keeps its hints alive, so a matching key names the very same objects
_CODES: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[TopologyHint, ...]]] = {}
_CODES_LIMIT = 4096


def _allocation_key(a: Allocation) -> Key:
    """A node.Allocation as a hashable value (its memory and devices are dicts)."""
    return (a.pod, a.container, a.cpus.mask, tuple((n, tuple(r.items())) for n, r in a.memory.items()),
            tuple(a.devices.items()), a.origin)


class VerdictTable:
    """Verdict details stored once: identical content gets one id (so identical classes merge).
    Interning uses a hashable signature; the JSON form is built only by `to_dict`."""

    def __init__(self) -> None:
        self.ids: dict[Key, int] = {}
        self.items: list[NodeVerdict] = []
        #: {names shown: {id(row): (sort key, group, row)}}: PodRecord.groups' work per explanation row object
        self.rows_seen: dict[int, dict[int, _SeenRow]] = {}

    @staticmethod
    def signature(v: NodeVerdict) -> Key:
        containers = None
        if v.volcano is not None:
            containers = tuple((c.name, id(c.model), c.hints_key, c.best, c.admit, c.cpus, c.order_dependent)
                               for c in v.volcano.containers)
        admission: Key | None = None
        if v.admission is not None:
            admission = (tuple(decision_key(d) for d in v.admission.decisions),
                         tuple(_allocation_key(a) for a in v.admission.allocations), v.admission.reason)
        return (v.outcome, v.code, v.reason, v.numa_count, v.numa_mask, v.cpus, containers, admission, v.score)

    def intern(self, verdict: NodeVerdict) -> int:
        key = self.signature(verdict)
        vid = self.ids.get(key)
        if vid is None:
            vid = self.ids[key] = len(self.items)
            self.items.append(verdict)
        verdict.sig = vid
        return vid

    def outcome(self, vid: int) -> Outcome:
        return self.items[vid].outcome

    def to_dict(self, used: set[int] | None = None) -> dict[str, VerdictDict]:
        return {str(i): v.to_dict() for i, v in enumerate(self.items) if used is None or i in used}


@dataclass
class PodRecord:
    """Everything decided for one pod (see the module docstring for the JSON form)."""

    pod: str
    uid: str
    namespace: str
    job: str
    task: str
    policy: str
    qos: str
    nodes_total: int
    status: PodStatus = PodStatus.UNSCHEDULABLE
    node: str | None = None
    score: int | None = None
    message: str | None = None
    predicted: NodeVerdict | None = None
    admission: AdmitResult | None = None  # on the chosen node
    kubelet_reason: str | None = None
    admitted_numa: int | None = None
    allocations: list[Allocation] | None = None
    dra: ClaimsDict | None = None  # the devices its claims got on the node, why, their NUMA nodes, the alignment
    #: the pod's verdict rows `[(verdict id, score, node count, first names sorted)]`, one per verdict: the
    #: session keeps them grouped per pod shape as classes change, so a pod copies them, never walks classes
    rows: list[Row] = field(default_factory=list)

    @property
    def placed(self) -> bool:
        return self.status in (PodStatus.ADMITTED, PodStatus.REJECTED)

    def admitted_cpus(self) -> int:
        mask = 0
        for a in self.allocations or ():
            mask |= a.cpus.mask
        return mask

    def groups(self, table: VerdictTable, explain_names: int = 10, explain_groups: int = 64
               ) -> tuple[list[Group], dict[Outcome, int], tuple[int, int]]:
        """The pod's verdict groups as `to_dict` lists them, without building JSON: `[(verdict id, outcome,
        score, node count, names)]` in display order (at most `explain_groups`), node counts per outcome,
        and (groups, nodes) left out. Stores that keep the explanation as rows read it from here; a group
        is the same object for every pod whose row is (see `VerdictTable.rows_seen`)."""
        seen = table.rows_seen.get(explain_names)
        if seen is None:
            seen = table.rows_seen[explain_names] = {}
        # a row object repeats from pod to pod while its group is unchanged: its sort key and group are
        # remembered by identity (the entry holds the row, so its id stays its own); the lookups run in C
        found = list(map(seen.get, map(id, self.rows)))
        if None in found:
            items = table.items
            for i, k in enumerate(found):
                if k is None:
                    row = self.rows[i]
                    sig, score, count, names = row
                    outcome = items[sig].outcome
                    names = tuple(names[:explain_names])
                    key = group_order(outcome, score, names[0] if names else "")
                    found[i] = seen[id(row)] = (key, (sig, outcome, score, count, names), row)
        known = cast(list[_SeenRow], found)  # every None was filled above
        known.sort(key=itemgetter(0))  # stable: ties as they came
        groups: list[Group] = list(map(itemgetter(1), known))
        outcomes: dict[Outcome, int] = {PASSED: 0, SKIPPED: 0, FILTERED: 0, UNSCHEDULABLE: 0}
        for group in groups:
            outcomes[group[1]] += group[3]
        omitted = groups[explain_groups:]
        return groups[:explain_groups], outcomes, (len(omitted), sum(g[3] for g in omitted))

    def to_dict(self, table: VerdictTable, explain_names: int = 10, explain_groups: int = 64) -> PodRecordDict:
        groups, outcomes, (omitted_groups, omitted_nodes) = self.groups(table, explain_names, explain_groups)
        predicted: PredictedDict | None = None
        if self.predicted is not None:
            predicted = {"verdict": self.predicted.sig, "numa": _bits(self.predicted.numa_mask),
                         "cpus": str(CPUSet(self.predicted.cpus)),
                         "order_dependent": self.predicted.order_dependent}
        return {
            "pod": self.pod, "uid": self.uid, "namespace": self.namespace, "job": self.job, "task": self.task,
            "policy": self.policy, "qos": self.qos, "status": self.status, "node": self.node, "score": self.score,
            "message": self.message, "predicted": predicted,
            "admission": None if self.admission is None else self.admission.to_dict(),
            "kubelet_reason": self.kubelet_reason,
            "admitted_numa": None if self.admitted_numa is None else _bits(self.admitted_numa),
            "allocations": None if self.allocations is None else [a.to_dict() for a in self.allocations],
            "outcomes": outcomes,
            "groups": [{"verdict": sig, "outcome": outcome, "reason": table.items[sig].reason, "score": score,
                        "node_count": count, "nodes": list(names)} for sig, outcome, score, count, names in groups],
            "groups_omitted": {"groups": omitted_groups, "nodes": omitted_nodes}, "dra": self.dra,
        }


@dataclass
class SessionResult:
    """The outcome of `run_session`: per-pod records, per-job gang results, counts and timings."""

    profile: str
    weight: int
    nodes_total: int
    pods: list[PodRecord]
    jobs: list[JobResult]
    table: VerdictTable
    timings: Timings
    volcano_close: list[CloseEntry]
    explain_names: int = 10
    explain_groups: int = 64

    @property
    def counts(self) -> Counts:
        c: Counts = {"pods": len(self.pods), "placed": 0, "unplaced": 0, "admitted": 0, "topology_affinity_errors": 0,
             "admission_errors": 0, "rolled_back": 0, "single_numa": 0, "cpu_prediction_mismatches": 0}
        for p in self.pods:
            if p.placed:
                c["placed"] += 1
            else:
                c["unplaced"] += 1
            if p.status == PodStatus.ROLLED_BACK:
                c["rolled_back"] += 1
            if p.status == PodStatus.ADMITTED:
                c["admitted"] += 1
                if p.admitted_numa is not None and p.admitted_numa.bit_count() == 1:
                    c["single_numa"] += 1
                predicted = p.predicted
                v = predicted.volcano if predicted is not None else None
                if (predicted is not None and v is not None and v.outcome == PASS_ASSIGNED
                        and predicted.cpus != p.admitted_cpus()):
                    c["cpu_prediction_mismatches"] += 1
            elif p.status == PodStatus.REJECTED:
                if p.kubelet_reason == "TopologyAffinityError":
                    c["topology_affinity_errors"] += 1
                else:
                    c["admission_errors"] += 1
        return c

    def pod(self, name: str) -> PodRecord:
        for p in self.pods:
            if p.pod == name:
                return p
        raise KeyError(name)

    def placements(self) -> dict[str, str]:
        """Pod name → node for every pod the scheduler placed (admitted or rejected by the kubelet)."""
        return {p.pod: p.node for p in self.pods if p.placed and p.node is not None}

    def to_dict(self) -> SessionDict:
        pods = [p.to_dict(self.table, self.explain_names, self.explain_groups) for p in self.pods]
        used = {g["verdict"] for p in pods for g in p["groups"]}
        used |= {p["predicted"]["verdict"] for p in pods if p["predicted"] is not None}
        return {
            "schema": SCHEMA,
            "profile": self.profile,
            "weight": self.weight,
            "nodes_total": self.nodes_total,
            "counts": self.counts,
            "timings": self.timings.copy(),
            "jobs": list(self.jobs),
            "pods": pods,
            "verdicts": self.table.to_dict(used),
            "volcano_close": [{"task_uid": e["task_uid"], "pod_meta": e["pod_meta"], "node": e["node"],
                               "cpus": str(CPUSet(e["cpus"]))} for e in self.volcano_close],
        }
