"""The engine's `SessionResult` → result rows (see models.py), read straight from its objects.

Nothing goes through `SessionResult.to_dict()`: masks stay ints (NUMA masks in a BIGINT, CPU masks as
hex), and what repeats is interned per session — verdicts by the engine's id, verdict groups, node
name lists and JSON details by content — so a pod costs one small row plus references. Every session row
another app stores (make room's verifying dry run) is written here too (`save_dry_run`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Generic, TypeVar, cast, overload

from django.db import connection, models
from django.utils import timezone

from scheduler_core.kubelet.admission import AdmitResult
from scheduler_core.model.cpuset import list_format
from scheduler_core.scheduler.explain import PodRecord, PodStatus, SessionResult, decision_key
from scheduler_core.volcano.numaaware import Verdict as VolcanoVerdict

from .models import Detail, NodeNames, Placement, SchedulingSession, SessionJob, Verdict, VerdictGroup

BATCH = 1000


T = TypeVar("T")
K = TypeVar("K")


def db_mask(mask: int | None) -> int | None:
    """A NUMA mask (≤ 64 bits) as a signed BIGINT."""
    if mask is None:
        return None
    return mask - (1 << 64) if mask >= 1 << 63 else mask


@overload
def mask_of(value: int) -> int: ...
@overload
def mask_of(value: None) -> None: ...
def mask_of(value: int | None) -> int | None:
    """Inverse of `db_mask`."""
    if value is None:
        return None
    return value + (1 << 64) if value < 0 else value


def hex_mask(mask: int | None) -> str:
    return format(mask or 0, "x")


class _Interner(Generic[K]):
    """Content → ref for one session's table."""

    def __init__(self) -> None:
        self.refs: dict[K, int] = {}

    def __call__(self, key: K) -> int:
        ref = self.refs.get(key)
        if ref is None:
            ref = self.refs[key] = len(self.refs)
        return ref


ALLOCATION_DEFAULTS = {"origin": "scheduled", "memory": {}, "devices": {}}


def compact_allocations(allocations: list[dict] | None, pod: str) -> list[dict] | None:
    """`Allocation.to_dict()`s without what is implied: the pod (when it is `pod`) and default values."""
    if allocations is None:
        return None
    return [{k: v for k, v in a.items() if not (k == "pod" and v == pod) and ALLOCATION_DEFAULTS.get(k, 0) != v}
            for a in allocations]


def expand_allocations(allocations: list[dict] | None, pod: str) -> list[dict] | None:
    """Inverse of `compact_allocations` (keys in `Allocation.to_dict` order)."""
    if allocations is None:
        return None
    return [{"pod": a.get("pod", pod), "container": a.get("container"), "cpus": a.get("cpus", ""),
             "memory": a.get("memory", {}), "devices": a.get("devices", {}), "origin": a.get("origin", "scheduled")}
            for a in allocations]


def _json_key(data: object) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


class ResultWriter:
    """Builds every result row of one session; `save()` bulk-inserts them (inside the caller's transaction)."""

    def __init__(self, session: SchedulingSession, result: SessionResult, node_ids: Mapping[str, int]) -> None:
        self.session, self.result, self.node_ids = session, result, node_ids
        self.details: _Interner[str] = _Interner()
        self.names: _Interner[tuple[str, ...]] = _Interner()
        self.groups: _Interner[tuple[int, int | None, int, int]] = _Interner()  # (verdict, score, count, names)
        self.decision_refs: dict[tuple, int] = {}
        self.row_refs: dict[int, int] = {}
        self.rows_held: list[tuple] = []
        self.verdicts: set[int] = set()
        self.placements = [self._placement(i, p) for i, p in enumerate(result.pods)]
        bound = {e["task_uid"]: hex_mask(e["cpus"]) for e in result.volcano_close}
        for row in self.placements:
            row["bound_cpus"] = bound.get(row["uid"])

    # -- interning ---------------------------------------------------------------------------------
    def _detail(self, data: object) -> int:
        return self.details(_json_key(data))

    def _decisions(self, decisions: list) -> int:
        """An admission's decisions as a detail ref, interned by their content as ints first: most pods
        repeat another's, and their JSON is then built once, not once per pod."""
        key = tuple(decision_key(d) for d in decisions)
        ref = self.decision_refs.get(key)
        if ref is None:
            ref = self.decision_refs[key] = self._detail([d.to_dict() for d in decisions])
        return ref

    def _group_refs(self, rows: list[tuple[int, int | None, int, tuple[str, ...]]]) -> list[int]:
        """The refs of a pod's verdict rows, all of them, in the engine's order (readers rank and cut them:
        results.py). The engine hands out the same row object while its group is unchanged, so most are
        found by identity, in C (`rows_held` keeps each row alive: its id cannot be reused)."""
        found = list(map(self.row_refs.get, map(id, rows)))
        if None not in found:
            return cast(list[int], found)  # no None in it: the check above, in C
        limit = self.result.explain_names
        refs: list[int] = []
        for row, ref in zip(rows, found, strict=True):
            if ref is None:
                sig, score, count, names = row
                self.verdicts.add(sig)
                ref = self.row_refs[id(row)] = self.groups((sig, score, count, self.names(tuple(names[:limit]))))
                self.rows_held.append(row)
            refs.append(ref)
        return refs

    # -- one pod ------------------------------------------------------------------------------------
    def _placement(self, index: int, p: PodRecord) -> dict:
        placed = p.placed
        allocations = None if p.allocations is None else [a.to_dict() for a in p.allocations]
        if p.allocations:
            cpus = list_format(p.admitted_cpus())
        elif placed and p.predicted is not None:
            cpus = list_format(p.predicted.cpus or 0)
        else:
            cpus = ""
        admission: dict[str, object] | None = None
        if p.admission is not None:
            a = _engine(p.admission, AdmitResult)
            admission = {"admitted": a.admitted, "error": None if a.error is None else a.error.to_dict(),
                         "cpus": str(a.cpus), "decisions": self._decisions(a.decisions)}
            if a.pod != p.uid:
                admission["pod"] = a.pod
            if a.node != p.node:
                admission["node"] = a.node
            if not _same_objects(a.allocations, p.allocations or ()):  # usually the pod's own (rolled back: not)
                own = [x.to_dict() for x in a.allocations]
                if own != (allocations or []):
                    admission["allocations"] = compact_allocations(own, p.uid)
        if p.predicted is not None:
            self.verdicts.add(p.predicted.sig)
        return dict(
            session_id=self.session.pk, index=index, namespace=p.namespace, job=p.job, task=p.task, pod=p.pod,
            uid=p.uid, policy=p.policy, qos=p.qos, status=p.status,
            node_id=self.node_ids.get(p.node) if placed and p.node else None,
            node_name=p.node or "", cpus=cpus if placed else "", predicted=placed,
            admitted=(p.status == PodStatus.ADMITTED) if placed else None, score=p.score, message=p.message,
            kubelet_reason=p.kubelet_reason,
            predicted_verdict=None if p.predicted is None else p.predicted.sig,
            predicted_numa=None if p.predicted is None else db_mask(p.predicted.numa_mask),
            predicted_cpus="" if p.predicted is None else hex_mask(p.predicted.cpus),
            predicted_order_dependent=p.predicted is not None and p.predicted.order_dependent,
            admitted_numa=db_mask(p.admitted_numa), allocations=compact_allocations(allocations, p.uid),
            admission=admission, dra=p.dra,
            outcomes=_EMPTY, groups=_int_list(self._group_refs(p.rows)),
        )

    # -- verdicts -----------------------------------------------------------------------------------
    def _verdict(self, ref: int) -> dict:
        v = self.result.table.items[ref]
        evidence: int | None = None
        own: dict[str, object] | None = None
        if v.volcano is not None:
            containers = []
            cpus = []
            for c in _engine(v.volcano, VolcanoVerdict).containers:
                cpus.append(hex_mask(c.cpus))
                containers.append({k: value for k, value in c.to_dict().items() if k != "cpus"})
            evidence, own = self._detail(containers), {"container_cpus": cpus}
        elif v.admission is not None:
            admission = _engine(v.admission, AdmitResult).to_dict()
            evidence = self._detail(admission["decisions"])
            own = {k: value for k, value in admission.items() if k != "decisions"}
            own["allocations"] = compact_allocations(admission["allocations"], admission["pod"])
        return dict(session_id=self.session.pk, ref=ref, outcome=v.outcome, code=v.code, reason=v.reason,
                    numa_count=v.numa_count, numa_mask=db_mask(v.numa_mask), cpus=hex_mask(v.cpus),
                    evidence=evidence, own=own)

    def save(self) -> None:
        s = self.session.pk
        verdicts = [self._verdict(ref) for ref in sorted(self.verdicts)]  # may intern more details
        _insert(Placement, self.placements)
        _insert(Verdict, verdicts)
        _insert(VerdictGroup, (dict(session_id=s, ref=ref, verdict=sig, score=score, node_count=count, names=names)
                               for (sig, score, count, names), ref in self.groups.refs.items()))
        _insert(NodeNames, (dict(session_id=s, ref=ref, names=" ".join(names))
                            for names, ref in self.names.refs.items()))
        _insert(Detail, (dict(session_id=s, ref=ref, data=_Dumped(key)) for key, ref in self.details.refs.items()))
        _insert(SessionJob, (dict(session_id=s, index=i, job=j["job"], namespace=j["namespace"], priority=j["priority"],
                                  min_available=j["min_available"], pods=j["pods"], placed=j["placed"],
                                  held=j.get("held", 0), committed=j["committed"])
                             for i, j in enumerate(self.result.jobs)))


def _engine(value: object, kind: type[T]) -> T:
    """A PodRecord's or NodeVerdict's evidence, which the engine types `object` (the kubelet's AdmitResult,
    Volcano's Verdict), as the type it is."""
    if not isinstance(value, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


class _Dumped(str):
    """JSON text already dumped (an interned detail's key): inserted as it is."""


_EMPTY = _Dumped("[]")  # a placement's outcome counts: derived from its groups when read (results.py)


def _int_list(values: list[int]) -> _Dumped:
    """A JSON array of ints, written directly: json.dumps of each pod's group refs and outcome counts
    was the largest single cost of a 10,000-pod commit."""
    return _Dumped(f"[{','.join(map(str, values))}]")


def _insert(model: type[models.Model], rows: Iterable[dict]) -> None:
    """INSERT the rows (dicts by attname; absent fields take their default) with executemany: the ORM's
    per-instance cost is most of a 10,000-pod commit otherwise. JSON values are dumped here."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    is_json = [isinstance(f, models.JSONField) for f in fields]
    marks = ["%s::jsonb" if j and connection.vendor == "postgresql" else "%s" for j in is_json]
    sql = (f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
           f"VALUES ({', '.join(marks)})")
    defaults = [(f.attname, f.get_default()) for f in fields]
    json_at = [i for i, j in enumerate(is_json) if j]
    batch: list[list] = []
    with connection.cursor() as cursor:
        for row in rows:
            get = row.get
            values = [get(name, default) for name, default in defaults]
            for i in json_at:
                value = values[i]
                if value is not None and not isinstance(value, _Dumped):
                    values[i] = _dumps(value)
            batch.append(values)
            if len(batch) == BATCH:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


_dumps = json.JSONEncoder().encode  # json.dumps with its defaults, without its per-call argument handling


def _same_objects(a: list, b: Iterable) -> bool:
    b = list(b)
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def clear(session: SchedulingSession) -> None:
    """Remove a session's result rows (before writing a run's results again)."""
    for model in (Placement, SessionJob, Verdict, VerdictGroup, NodeNames, Detail):
        model.objects.filter(session=session).delete()


def save_dry_run(cluster_id: int, profile: str, job_ids: list[int], result: SessionResult,
                 node_ids: Mapping[str, int], started_at: datetime | None, worker: str,
                 room_check: bool = False) -> SchedulingSession:
    """A dry run another app computed (make room's verifying session: `room_check`) stored as a done session with
    its results, so the session page shows it like any other: the scheduling app writes every session row."""
    counts = result.counts
    now = timezone.now()
    session = SchedulingSession.objects.create(
        cluster_id=cluster_id, profile=profile, dry_run=True, room_check=room_check, status=SchedulingSession.DONE,
        started_at=started_at or now, finished_at=now, worker=worker, runs=1, attempts=1,
        engine_ms=result.timings["total_s"] * 1000, pods_total=counts["pods"], pods_placed=counts["placed"],
        pods_admitted=counts["admitted"], jobs_total=len(result.jobs), job_count=len(job_ids),
        jobs_placed=sum(1 for j in result.jobs if j["committed"]), nodes_total=result.nodes_total,
        progress_done=counts["pods"], progress_total=counts["pods"], weight=result.weight,
        explain_names=result.explain_names, explain_groups=result.explain_groups, counts=counts,
        timings=dict(result.timings))
    if job_ids:
        session.jobs.add(*job_ids)
    ResultWriter(session, result, node_ids).save()
    return session
