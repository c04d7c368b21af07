"""Running a scheduling session: rows → engine → rows.

`start_session` creates the row and queues its id after commit. `execute_session` (what the Celery
task runs) reads the cluster and jobs, calls `scheduler_core.session.run_session` with a progress
callback that writes (throttled) to the row, then writes every placement and allocation in ONE
transaction. The commit first advances each node it allocates on from the generation it read
(`UPDATE ... WHERE generation = read`); if another writer got there first, nothing is written and
the session runs again on fresh state. Any failure leaves the database as it was, with the session
marked failed and its reason; a failed session can be run again."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.inventory.services import cluster_nodes
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from scheduler_core.cpuset import CPUSet
from scheduler_core.errors import EngineError

from .models import Placement, SchedulingSession

log = logging.getLogger("numaweb.scheduling")

PROGRESS_INTERVAL = 0.25  # seconds between progress writes to the session row
BATCH = 1000


class BrokerUnavailable(RuntimeError):
    """The session row exists but its id could not be queued (broker down); `session_id` names it."""

    session_id: int | None = None


class StaleNodes(RuntimeError):
    """A node changed between read and commit: the session must run again on fresh state."""


class SessionNotRunnable(RuntimeError):
    pass


def checkpoint(stage: str, session: SchedulingSession) -> None:
    """Named points in a run ("computed": engine done, before the commit; "written": rows written,
    inside the commit's transaction). No-op; tests replace it to inject races and failures."""


# -- starting ------------------------------------------------------------------------------------
def enqueue(session_id: int) -> None:
    """Hand the session id to the broker; a broker that cannot be reached raises BrokerUnavailable."""
    from kombu.exceptions import OperationalError

    from .tasks import run_scheduling_session

    try:
        run_scheduling_session.delay(session_id)
    except (OperationalError, ConnectionError, OSError) as exc:
        raise BrokerUnavailable(f"the task queue is unavailable ({exc}); session {session_id} was saved and "
                                "can be started again when the broker is back") from exc


def _queue(session_id: int) -> None:
    """Queue now when the row is committed; inside an outer transaction, queue after its commit (a
    broker failure then marks the session failed instead of raising into someone else's commit)."""
    if not transaction.get_connection().in_atomic_block:
        try:
            enqueue(session_id)
        except BrokerUnavailable as exc:
            exc.session_id = session_id
            SchedulingSession.objects.filter(pk=session_id).update(
                status=SchedulingSession.FAILED, error=str(exc), finished_at=timezone.now())
            raise
        return

    def later() -> None:
        try:
            enqueue(session_id)
        except BrokerUnavailable as exc:
            SchedulingSession.objects.filter(pk=session_id).update(
                status=SchedulingSession.FAILED, error=str(exc), finished_at=timezone.now())

    transaction.on_commit(later)


def start_session(cluster: Cluster, profile: str = "volcano", dry_run: bool = False,
                  jobs: Iterable[Job] | None = None) -> SchedulingSession:
    """Create a session (every pending job unless `jobs` is given) and queue its id once committed.

    Raises BrokerUnavailable (after marking the session failed, so it can be re-run: nothing is
    lost) when the broker is down."""
    if profile not in SchedulingSession.PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of: {', '.join(SchedulingSession.PROFILES)}")
    with transaction.atomic():
        session = SchedulingSession.objects.create(cluster=cluster, profile=profile, dry_run=dry_run)
        chosen = list(jobs) if jobs is not None else list(Job.objects.filter(status=Job.PENDING))
        session.jobs.set(chosen)
    _queue(session.pk)
    return session


def rerun_session(session: SchedulingSession) -> SchedulingSession:
    """Queue a failed (or never-started) session again; its earlier attempt wrote nothing."""
    updated = SchedulingSession.objects.filter(
        pk=session.pk, status__in=(SchedulingSession.FAILED, SchedulingSession.PENDING)
    ).update(status=SchedulingSession.PENDING, error="", progress_done=0, finished_at=None)
    if not updated:
        raise SessionNotRunnable(f"session {session.pk} is {session.status}; only failed or pending sessions "
                                 "can be run again")
    _queue(session.pk)
    session.refresh_from_db()
    return session


# -- running ---------------------------------------------------------------------------------------
class _Progress:
    """The engine's progress callback: writes done/total to the row at most every PROGRESS_INTERVAL."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.last = 0.0

    def __call__(self, done: int, total: int, *args: Any, **kwargs: Any) -> None:
        now = time.monotonic()
        if done < total and now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        SchedulingSession.objects.filter(pk=self.session_id).update(progress_done=done, progress_total=total)


def execute_session(session_id: int) -> SchedulingSession:
    """Run the session now (in the worker). Never raises for a session-level failure: the row says it."""
    session = SchedulingSession.objects.select_related("cluster").get(pk=session_id)
    if session.status in (SchedulingSession.DONE, SchedulingSession.RUNNING):
        log.info("session %s is already %s; not running it twice", session_id, session.status)
        return session
    SchedulingSession.objects.filter(pk=session_id).update(
        status=SchedulingSession.RUNNING, started_at=timezone.now(), finished_at=None, error="",
        progress_done=0, runs=session.runs + 1)
    session.refresh_from_db()
    try:
        _run_with_retries(session)
    except Exception as exc:
        reason = str(exc) if isinstance(exc, EngineError | StaleNodes) else f"{type(exc).__name__}: {exc}"
        log.exception("session %s failed", session_id)
        SchedulingSession.objects.filter(pk=session_id).update(
            status=SchedulingSession.FAILED, error=reason or type(exc).__name__, finished_at=timezone.now())
    session.refresh_from_db()
    return session


def _run_with_retries(session: SchedulingSession) -> None:
    from scheduler_core.session import Cluster as EngineCluster
    from scheduler_core.session import run_session

    retries = max(1, settings.NUMAWEB_COMMIT_RETRIES)
    for attempt in range(1, retries + 1):
        nodes, seen = cluster_nodes(session.cluster)
        job_rows = list(session.jobs.prefetch_related("tasks").order_by("id"))
        jobs = [job_services.to_engine(j) for j in job_rows]
        started = time.perf_counter()
        result = run_session(EngineCluster(nodes), jobs, profile=session.profile, progress=_Progress(session.pk))
        engine_ms = (time.perf_counter() - started) * 1000
        checkpoint("computed", session)
        try:
            _commit(session, result.to_dict(), seen, job_rows, len(nodes), engine_ms, attempt)
            return
        except StaleNodes as exc:
            log.info("session %s attempt %s: %s; retrying on fresh state", session.pk, attempt, exc)
            SchedulingSession.objects.filter(pk=session.pk).update(attempts=attempt)
    raise StaleNodes(f"nodes kept changing during {retries} attempts; run the session again")


PLACED = ("admitted", "rejected")  # the scheduler bound the pod (the kubelet may still reject it)


def _union(allocations: list[Mapping]) -> tuple[str, dict, dict]:
    """CPUs, memory and devices a pod holds, summed over its containers' allocations."""
    cpus = CPUSet()
    memory: dict[str, dict[str, int]] = {}
    devices: dict[str, list[str]] = {}
    for a in allocations:
        cpus = cpus | CPUSet.parse(a.get("cpus") or "")
        for numa, res in (a.get("memory") or {}).items():
            slot = memory.setdefault(str(numa), {})
            for r, amount in res.items():
                slot[r] = slot.get(r, 0) + amount
        for r, ids in (a.get("devices") or {}).items():
            devices.setdefault(r, []).extend(ids)
    return str(cpus), memory, devices


def _placement_rows(session: SchedulingSession, pods: list[Mapping], seen: Mapping[str, tuple[int, int]]
                    ) -> list[Placement]:
    columns = {"pod", "job", "task", "node", "allocations", "message"}
    rows = []
    for index, p in enumerate(pods):
        node_name = p.get("node") or ""
        placed = p.get("status") in PLACED
        allocations = p.get("allocations") or []
        if allocations:
            cpus, memory, devices = _union(allocations)
        else:
            cpus, memory, devices = ((p.get("predicted") or {}).get("cpus") or ""), {}, {}
        reason = p.get("message") or p.get("kubelet_reason") or ""
        rows.append(Placement(
            session=session, index=index, job=str(p.get("job") or ""), task=str(p.get("task") or ""),
            pod=str(p.get("pod") or ""), node_id=seen[node_name][0] if placed and node_name in seen else None,
            node_name=node_name if placed else "", cpus=cpus if placed else "", memory=memory, devices=devices,
            predicted=placed, admitted=(p.get("status") == "admitted") if placed else None, reason=str(reason),
            detail={**{k: v for k, v in p.items() if k not in columns}, "allocations": allocations}))
    return rows


def _allocation_rows(session: SchedulingSession, pods: list[Mapping], seen: Mapping[str, tuple[int, int]]
                     ) -> list[Allocation]:
    """What the session hands out: the kubelet's allocations (per container) of every admitted pod."""
    rows = []
    for p in pods:
        if p.get("status") != "admitted" or not p.get("node"):
            continue
        node_id = seen[p["node"]][0]
        for a in p.get("allocations") or ():
            rows.append(Allocation(node_id=node_id, pod=str(a["pod"]), container=a.get("container") or "",
                                   cpus=str(a.get("cpus") or ""), memory=a.get("memory") or {},
                                   devices=a.get("devices") or {}, origin=Allocation.SCHEDULED, session=session))
    return rows


def _commit(session: SchedulingSession, result: dict, seen: Mapping[str, tuple[int, int]], job_rows: list[Job],
            nodes_total: int, engine_ms: float, attempt: int) -> None:
    started = time.perf_counter()
    pods = list(result.pop("pods", None) or [])
    allocations = [] if session.dry_run else _allocation_rows(session, pods, seen)
    touched = sorted({a.node_id for a in allocations})
    names = {nid: name for name, (nid, _g) in seen.items()}
    committed = {str(j.get("job")) for j in result.get("jobs") or () if j.get("committed") and j.get("placed")}
    with transaction.atomic():
        for node_id in touched:
            generation = seen[names[node_id]][1]
            if not Node.objects.filter(pk=node_id, generation=generation).update(generation=generation + 1):
                raise StaleNodes(f"node {names[node_id]} changed while the session ran")
        Placement.objects.filter(session=session).delete()
        Placement.objects.bulk_create(_placement_rows(session, pods, seen), batch_size=BATCH)
        Allocation.objects.bulk_create(allocations, batch_size=BATCH)
        if not session.dry_run:
            for job in job_rows:
                status = Job.SCHEDULED if job.name in committed else Job.UNSCHEDULABLE
                Job.objects.filter(pk=job.pk).update(status=status)
        checkpoint("written", session)
        SchedulingSession.objects.filter(pk=session.pk).update(
            status=SchedulingSession.DONE, finished_at=timezone.now(), attempts=attempt, engine_ms=engine_ms,
            commit_ms=(time.perf_counter() - started) * 1000, pods_total=len(pods),
            pods_placed=sum(1 for p in pods if p.get("status") in PLACED),
            pods_admitted=sum(1 for p in pods if p.get("status") == "admitted"),
            jobs_total=len(job_rows), jobs_placed=len(committed), nodes_total=nodes_total,
            progress_done=len(pods), progress_total=len(pods), error="", summary=result)
