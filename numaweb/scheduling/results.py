"""Reading a session's results: what pages, the API and other apps need, loading only that.

- `pod_records(session, placements)`: pods in the `numaweb.session` export form (one query per
  interned table, for just the refs those pods use).
- `verdicts(session, refs)`: verdict details by ref, in the export form.
- `export_chunks(session)`: the whole `numaweb.session/1` document, as text chunks, pod by pod
  (what `GET /api/sessions/<id>/explanation.json` streams; equal to the engine's `to_dict()`).
- `placement_spans(session)`: per pod where it went and over how many NUMA nodes (predicted and
  admitted), for metrics and charts.
- `span_counts(session)`: pods by the number of NUMA nodes they were admitted on (the session page's chart)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from django.db.models import QuerySet

from scheduler_core.model.bitmask import bits_of
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.scheduler.compare import span_histogram
from scheduler_core.scheduler.explain import SCHEMA, Outcome, group_order

from .models import Detail, NodeNames, Placement, SchedulingSession, SessionJob, Verdict, VerdictGroup
from .store import expand_allocations, mask_of

OUTCOMES = (Outcome.PASSED, Outcome.SKIPPED, Outcome.FILTERED, Outcome.UNSCHEDULABLE)  # rows before 0008: this order
CHUNK = 500


def _cpus(hex_text: str | None) -> str:
    return str(CPUSet(int(hex_text, 16) if hex_text else 0))


def _numa(value: int | None) -> list[int] | None:
    return None if value is None else bits_of(mask_of(value))


R = TypeVar("R", VerdictGroup, NodeNames, Verdict, Detail)
V = TypeVar("V")


class _Group(NamedTuple):
    """A verdict group's row, read as values (a page of 100 pods reads about 600; as models they were a third of
    its CPU time)."""

    ref: int
    verdict: int
    score: int | None
    node_count: int
    names: int


class _Tables:
    """One session's interned rows, fetched by ref on demand and kept for the next pods."""

    def __init__(self, session: SchedulingSession) -> None:
        self.session = session
        self.groups: dict[int, _Group] = {}
        self.names: dict[int, list[str]] = {}
        self.details: dict[int, Any] = {}  # decoded JSON
        self.verdicts: dict[int, Verdict] = {}
        self.outcomes: dict[int, tuple[str, str | None]] = {}  # a group's verdict: (outcome, reason)

    def _load(self, model: type[R], cache: dict[int, V], refs: Iterable[int | None], convert: Callable[[Any], V],
              everything: bool = False, values: tuple[str, ...] = ()) -> None:
        """Rows of `model` by ref into `cache` (converted): the `refs` not there yet, or `everything`. With
        `values`, each row is read as the tuple (ref, *values), not as a model."""
        rows: QuerySet[Any] = model._default_manager.filter(session=self.session)
        if values:
            rows = rows.values_list("ref", *values)

        def ref_of(row: Any) -> int:
            return int(row[0]) if values else int(row.ref)

        if everything:
            for row in rows.iterator(chunk_size=2000):
                cache[ref_of(row)] = convert(row)
            return
        missing = sorted({r for r in refs if r is not None and r not in cache})
        for start in range(0, len(missing), CHUNK):
            for row in rows.filter(ref__in=missing[start:start + CHUNK]):
                cache[ref_of(row)] = convert(row)

    def load_groups(self, placements: Sequence[Placement]) -> None:
        self._load(VerdictGroup, self.groups, (g for p in placements for g in p.groups or ()), _Group._make,
                   values=_Group._fields[1:])
        self._load(NodeNames, self.names, (g.names for g in self.groups.values()), _split, values=("names",))
        # what a group shows of its verdict, not the verdict's JSON (decoded for the verdicts' own answers)
        self._load(Verdict, self.outcomes, (g.verdict for g in self.groups.values()), _outcome,
                   values=("outcome", "reason"))

    def load_verdicts(self, refs: Iterable[int | None]) -> None:
        self._load(Verdict, self.verdicts, refs, _same)

    def load_details(self, refs: Iterable[int | None]) -> None:
        self._load(Detail, self.details, refs, _data)

    def everything(self) -> None:
        """The whole session's interned rows (for the export)."""
        self._load(VerdictGroup, self.groups, (), _Group._make, everything=True, values=_Group._fields[1:])
        self._load(NodeNames, self.names, (), _split, everything=True, values=("names",))
        self._load(Verdict, self.verdicts, (), _same, everything=True)
        self.outcomes.update((ref, (v.outcome, v.reason)) for ref, v in self.verdicts.items())
        self._load(Detail, self.details, (), _data, everything=True)


def _same(row: R) -> R:
    return row


def _split(row: tuple[int, str]) -> list[str]:
    return row[1].split()


def _outcome(row: tuple[int, str, str | None]) -> tuple[str, str | None]:
    return row[1], row[2]


def _data(row: Detail) -> Any:
    return row.data


def _group(tables: _Tables, ref: int) -> dict:
    g = tables.groups[ref]
    outcome, reason = tables.outcomes[g.verdict]
    # the names' list is shared by every pod of the group, not copied (no reader changes it): a group can name
    # thousands of nodes, and copying them for each of 100 pods was half of a results page's time
    return {"verdict": g.verdict, "outcome": outcome, "reason": reason, "score": g.score,
            "node_count": g.node_count, "nodes": tables.names[g.names]}


def _pod(tables: _Tables, p: Placement) -> dict:
    predicted = None
    if p.predicted_verdict is not None:
        predicted = {"verdict": p.predicted_verdict, "numa": _numa(p.predicted_numa), "cpus": _cpus(p.predicted_cpus),
                     "order_dependent": p.predicted_order_dependent}
    admission = None
    if p.admission is not None:
        a = p.admission
        admission = {"node": a.get("node", p.node_name), "pod": a.get("pod", p.uid), "admitted": a["admitted"],
                     "error": a["error"], "cpus": a["cpus"],
                     "allocations": expand_allocations(a.get("allocations", p.allocations or []), p.uid),
                     "decisions": tables.details[a["decisions"]]}
    return {
        "pod": p.pod, "uid": p.uid, "namespace": p.namespace, "job": p.job, "task": p.task, "policy": p.policy,
        "qos": p.qos, "status": p.status, "node": p.node_name or None, "score": p.score, "message": p.message,
        "predicted": predicted, "admission": admission, "kubelet_reason": p.kubelet_reason,
        "admitted_numa": _numa(p.admitted_numa), "allocations": expand_allocations(p.allocations, p.uid),
        "dra": p.dra, **_groups(tables, p),
    }


def _groups(tables: _Tables, p: Placement) -> dict:
    """The pod's outcome counts and its groups in display order, at most the session's `explain_groups`.
    A placement holds every group's ref in the engine's order, ranked and cut here; one written before
    that (its outcome counts stored) holds the groups shown, already ranked."""
    groups = [_group(tables, ref) for ref in p.groups or ()]
    if p.outcomes:
        return {"outcomes": dict(zip(OUTCOMES, p.outcomes, strict=True)), "groups": groups,
                "groups_omitted": {"groups": p.groups_omitted, "nodes": p.nodes_omitted}}
    outcomes = dict.fromkeys(OUTCOMES, 0)
    for g in groups:
        outcomes[g["outcome"]] += g["node_count"]
    groups.sort(key=lambda g: group_order(g["outcome"], g["score"], g["nodes"][0] if g["nodes"] else ""))
    limit = tables.session.explain_groups
    omitted = groups[limit:]
    return {"outcomes": outcomes, "groups": groups[:limit],
            "groups_omitted": {"groups": len(omitted), "nodes": sum(g["node_count"] for g in omitted)}}


def pod_records(session: SchedulingSession, placements: Sequence[Placement],
                tables: _Tables | None = None) -> list[dict]:
    """The export form of these pods, loading only the groups, names, verdicts and details they use."""
    tables = tables or _Tables(session)
    tables.load_groups(placements)
    tables.load_details(p.admission["decisions"] for p in placements if p.admission)
    return [_pod(tables, p) for p in placements]


def _verdict(tables: _Tables, v: Verdict) -> dict:
    out: dict[str, object] = {
        "outcome": v.outcome, "code": v.code, "reason": v.reason, "numa_count": v.numa_count,
        "numa": _numa(v.numa_mask), "cpus": _cpus(v.cpus), "order_dependent": False, "containers": None,
        "admission": None}
    own = v.own  # written with the evidence: both or neither
    if v.evidence is not None and own is not None and "container_cpus" in own:
        containers = [{**c, "cpus": _cpus(h)}
                      for c, h in zip(tables.details[v.evidence], own["container_cpus"], strict=True)]
        out["containers"] = containers
        out["order_dependent"] = any(c.get("order_dependent") for c in containers)
    elif v.evidence is not None and own is not None:
        out["admission"] = {**own, "allocations": expand_allocations(own["allocations"], own["pod"]),
                            "decisions": tables.details[v.evidence]}
    return out


def verdicts(session: SchedulingSession, refs: Iterable[int], tables: _Tables | None = None) -> dict[int, dict]:
    """Verdict details by ref, in the export form."""
    tables = tables or _Tables(session)
    refs = [r for r in refs if r is not None]
    tables.load_verdicts(refs)
    tables.load_details(tables.verdicts[r].evidence for r in refs if r in tables.verdicts)
    return {r: _verdict(tables, tables.verdicts[r]) for r in refs if r in tables.verdicts}


def export_chunks(session: SchedulingSession) -> Iterator[str]:
    """The `numaweb.session/1` document of a done session as JSON text, a pod at a time."""
    tables = _Tables(session)
    tables.everything()
    head = {"schema": SCHEMA, "profile": session.profile, "weight": session.weight,
            "nodes_total": session.nodes_total, "counts": session.counts, "timings": session.timings,
            "jobs": [{"job": j.job, "namespace": j.namespace, "priority": j.priority, "min_available": j.min_available,
                      "pods": j.pods, "placed": j.placed, "held": j.held, "committed": j.committed}
                     for j in SessionJob.objects.filter(session=session).order_by("index")]}
    yield json.dumps(head)[:-1] + ', "pods": ['
    used: set[int] = set()
    close: list[dict[str, Any]] = []  # JSON objects, as the engine's to_dict() writes them
    first = True
    for p in Placement.objects.filter(session=session).order_by("index").iterator(chunk_size=CHUNK):
        record = _pod(tables, p)
        used.update(g["verdict"] for g in record["groups"])
        if p.predicted_verdict is not None:
            used.add(p.predicted_verdict)
        if p.bound_cpus is not None:
            close.append({"task_uid": p.uid, "pod_meta": {"uid": p.uid, "name": p.pod, "namespace": p.namespace},
                          "node": p.node_name, "cpus": _cpus(p.bound_cpus)})
        yield ("" if first else ", ") + json.dumps(record)
        first = False
    yield '], "verdicts": {'
    yield ", ".join(f'"{ref}": {json.dumps(_verdict(tables, tables.verdicts[ref]))}' for ref in sorted(used))
    close.sort(key=lambda e: e["task_uid"])
    yield '}, "volcano_close": ' + json.dumps(close) + "}"


@dataclass(frozen=True)
class Span:
    """Where a pod went and over how many NUMA nodes (None where it does not apply)."""

    index: int
    namespace: str
    job: str
    pod: str
    status: str
    node: str
    score: int | None
    predicted_numa: int | None
    admitted_numa: int | None
    cpus: str


def placement_spans(session: SchedulingSession) -> Iterator[Span]:
    """Every pod of the session in order, from the placement columns only (no explanation loaded)."""
    rows = (Placement.objects.filter(session=session).order_by("index")
            .values_list("index", "namespace", "job", "pod", "status", "node_name", "score", "predicted_numa",
                         "admitted_numa", "cpus"))
    for index, namespace, job, pod, status, node, score, predicted, admitted, cpus in rows.iterator(chunk_size=2000):
        yield Span(index, namespace, job, pod, status, node, score,
                   None if predicted is None else mask_of(predicted).bit_count(),
                   None if admitted is None else mask_of(admitted).bit_count(), cpus)


def span_counts(session: SchedulingSession) -> dict[str, int]:
    """Pods by the number of NUMA nodes their admitted resources sit on (the engine's span bins), from the
    placement rows: the session page's span chart."""
    masks = [mask_of(numa) or 0 if admitted else None
             for admitted, numa in session.placements.values_list("admitted", "admitted_numa")]
    return span_histogram(masks)
