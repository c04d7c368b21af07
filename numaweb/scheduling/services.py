"""Running a scheduling session: rows → engine → rows.

`start_session` creates the row and queues its id after commit. `execute_session` (what the Celery
task runs) reads the cluster and jobs, calls `scheduler_core.scheduler.session.run_session` with a progress
callback that writes (throttled) to the row, then writes every placement and allocation in ONE
transaction. The commit first advances each node it allocates on from the generation it read
(`UPDATE ... WHERE generation = read`); if another writer got there first, nothing is written and
the session runs again on fresh state. Any failure leaves the database as it was, with the session
marked failed and its reason; a failed session can be run again.

A worker that dies mid-session (killed, out of memory) never commits, so it too leaves nothing. A session is a
run (numaweb.worker.runs, shared with comparison variants and make-room questions: claim, progress, time
limits, failure, re-queue up to NUMAWEB_RUN_MAX_RUNS starts); `SessionRuns` adds only what is a session's: its
own heartbeat (the progress writes; silent past NUMAWEB_SESSION_STALE_SECONDS it counts as lost) and `consume`,
the engine and the commit. The commit only lands if its run still owns the row."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from numaweb.inventory import dra
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.inventory.services import cluster_nodes
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.worker import runs
from scheduler_core.errors import EngineError
from scheduler_core.scheduler.cluster import Cluster as EngineCluster
from scheduler_core.scheduler.explain import PodRecord, PodStatus, SessionResult
from scheduler_core.scheduler.gc_pause import paused_gc
from scheduler_core.scheduler.session import run_session

from . import store
from .models import SchedulingSession

log = logging.getLogger("numaweb.scheduling")

PROGRESS_INTERVAL = 0.25  # seconds between progress writes to the session row
BATCH = 1000


class StaleNodes(RuntimeError):
    """A node changed between read and commit: the session must run again on fresh state."""


class SessionNotRunnable(RuntimeError):
    pass


def checkpoint(stage: str, session: SchedulingSession) -> None:
    """Named points in a run ("computed": engine done, before the commit; "written": rows written,
    inside the commit's transaction). No-op; tests replace it to inject races and failures."""


# -- the run kind ----------------------------------------------------------------------------------
class SessionRuns(runs.Kind):
    """Sessions as runs: what is theirs is the heartbeat column and `consume` (engine, then the commit, which
    writes the outcome itself)."""

    name = "sessions"
    model = SchedulingSession
    task = "numaweb.run_scheduling_session"
    queued_field = "updated_at"
    beat_field = "heartbeat_at"
    log_key = "session"
    known_errors = (EngineError, StaleNodes)
    related = ("cluster",)
    progress_interval = PROGRESS_INTERVAL

    def stale_seconds(self) -> float:
        return float(settings.NUMAWEB_SESSION_STALE_SECONDS)

    def consume(self, row: SchedulingSession, run: runs.Run, progress: runs.Progress) -> None:
        fields = {"session": row.pk, "run": row.runs}
        log.info("session %s started: run %s, profile %s, cluster %s, on %s", row.pk, row.runs, row.profile,
                 row.cluster.name, row.worker, extra=fields)
        started = time.perf_counter()
        with paused_gc():  # the engine's objects and the rows built from them: see scheduler_core.scheduler.gc_pause
            _run_with_retries(row, run, progress)
        row.refresh_from_db()
        ms = (time.perf_counter() - started) * 1000
        log.info("session %s done in %.0f ms (engine %.0f ms, commit %.0f ms, %s attempt(s)): %s/%s pods placed, "
                 "%s/%s jobs", row.pk, ms, row.engine_ms or 0, row.commit_ms or 0, row.attempts, row.pods_placed,
                 row.pods_total, row.jobs_placed, row.jobs_total,
                 extra={**fields, "ms": ms, "engine_ms": row.engine_ms, "commit_ms": row.commit_ms})


SESSIONS = runs.register(SessionRuns())


# -- starting ------------------------------------------------------------------------------------
def start_session(cluster: Cluster, profile: str = "volcano", dry_run: bool = False,
                  jobs: Iterable[Job] | None = None) -> SchedulingSession:
    """Create a session (every job of the cluster with a pod left to place unless `jobs` is given) and queue
    its id once committed.

    Raises jobs.services.NotSchedulable, naming the job, when a given job belongs to another cluster, is
    finished or all its pods already hold resources, and jobs.bounds.OutOfBounds when the jobs hold more
    pods than a session may schedule. Raises BrokerUnavailable (after marking the session failed, so it
    can be re-run: nothing is lost) when the broker is down."""
    if profile not in SchedulingSession.PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of: {', '.join(SchedulingSession.PROFILES)}")
    chosen = list(jobs) if jobs is not None else job_services.schedulable_jobs(cluster)
    job_services.check_schedulable(chosen, cluster)
    session = create_session(cluster, profile, dry_run, chosen)
    SESSIONS.queue([session.pk], session.pk)
    return session


def create_session(cluster: Cluster, profile: str, dry_run: bool, jobs: list[Job]) -> SchedulingSession:
    """The session row with its jobs and their count, in one transaction (not queued)."""
    ids = list(dict.fromkeys(j.pk for j in jobs))  # a job named twice is scheduled once
    with transaction.atomic():
        session = SchedulingSession.objects.create(cluster=cluster, profile=profile, dry_run=dry_run,
                                                   job_count=len(ids))
        link = SchedulingSession.jobs.through  # a new row links nothing yet: insert, without set()'s lookups
        link.objects.bulk_create([link(schedulingsession_id=session.pk, job_id=i) for i in ids], batch_size=BATCH)
    return session


def rerun_session(session: SchedulingSession) -> SchedulingSession:
    """Queue a failed (or never-started) session again; its earlier attempt wrote nothing. A running
    session whose worker is lost (runs.Kind.lost_reason) is first marked failed with that reason."""
    session.refresh_from_db()
    if session.status == SchedulingSession.RUNNING and not expire_if_lost(session):
        age = (timezone.now() - (session.heartbeat_at or session.started_at or session.updated_at)).total_seconds()
        raise SessionNotRunnable(
            f"session {session.pk} is running on {session.worker or 'a worker'} (last heartbeat {age:.0f} s ago); "
            f"it can be run again once it fails or sends no heartbeat for {settings.NUMAWEB_SESSION_STALE_SECONDS} s")
    updated = SchedulingSession.objects.filter(
        pk=session.pk, status__in=(SchedulingSession.FAILED, SchedulingSession.PENDING)
    ).update(status=SchedulingSession.PENDING, error="", progress_done=0, finished_at=None)
    if not updated:
        raise SessionNotRunnable(f"session {session.pk} is {session.status}; only failed or pending sessions "
                                 "(or running ones whose worker is lost) can be run again")
    SESSIONS.queue([session.pk], session.pk)
    session.refresh_from_db()
    return session


# -- lost workers ----------------------------------------------------------------------------------
def expire_if_lost(session: SchedulingSession, now: datetime | None = None) -> bool:
    """Mark a running session whose worker is lost as failed, with the reason; True when it did. The
    update is conditional on the row being unchanged, so a heartbeat or commit that lands first wins."""
    done = bool(SESSIONS.expire(session, now))
    session.refresh_from_db()
    return done


def watch(session: SchedulingSession) -> None:
    """A reader's look at a session (its API): a running one whose worker is lost is shown failed with the reason
    and sent again at once when it may run again (runs.Kind.watch), so a lost session is re-run whoever looks."""
    SESSIONS.watch(session)


# -- running ---------------------------------------------------------------------------------------
def execute_session(session_id: int, progress: Callable[[int, int], None] | None = None) -> SchedulingSession:
    """Run the session now (in the worker): `SESSIONS.execute` (numaweb.worker.runs.Kind.execute). Never raises
    for a session-level failure: the row says it. `progress(done, total)` also hears the engine's progress (a
    command's progress bar)."""
    session: SchedulingSession = SESSIONS.execute(session_id, progress)
    return session


def _run_with_retries(session: SchedulingSession, run: runs.Run, progress: runs.Progress) -> None:
    """The engine on fresh state, then the commit; again while another writer changed a node first."""
    retries = max(1, settings.NUMAWEB_COMMIT_RETRIES)
    for attempt in range(1, retries + 1):
        nodes, seen = cluster_nodes(session.cluster)
        job_rows, jobs = job_services.engine_jobs(session.jobs.all())
        held = _holders(job_rows)
        started = time.perf_counter()
        claims = dra.state_of(session.cluster, {n.name: n.topology for n in nodes}, jobs)
        result = run_session(EngineCluster(nodes), jobs, profile=session.profile,
                             progress=progress, held=held, dra=claims)
        engine_ms = (time.perf_counter() - started) * 1000
        checkpoint("computed", session)
        run.owns().update(heartbeat_at=timezone.now())
        try:
            _commit(session, run, result, seen, job_rows, held, len(nodes), engine_ms, attempt)
            return
        except StaleNodes as exc:
            log.info("session %s attempt %s: %s; retrying on fresh state", session.pk, attempt, exc)
            run.owns().update(attempts=attempt)
    raise StaleNodes(f"nodes kept changing during {retries} attempts; run the session again")


def _holders(job_rows: list[Job]) -> dict[str, tuple[int, str]]:
    """{pod uid: (job id, where it holds resources in words)} for every pod of these jobs holding an allocation."""
    out: dict[str, tuple[int, str]] = {}
    for pod, job_id, node, cpus in (Allocation.objects.filter(job__in=job_rows).order_by("id")
                                    .values_list("pod", "job_id", "node__name", "cpus")):
        out.setdefault(pod, (job_id, f"already holds CPUs {cpus or '(none)'} on node {node}"))
    return out


def _skip(record: PodRecord, why: str, again: bool = True) -> PodRecord:
    """Mark a pod record the commit does not allocate for: the pod got resources from another writer
    (`again`), or its job was finished or deleted while the session ran."""
    record.status = PodStatus.SKIPPED
    record.message = f"not placed{' again' if again else ''}: pod {record.pod} {why}"
    record.allocations = []
    return record


def _allocation_rows(session: SchedulingSession, result: SessionResult, seen: Mapping[str, tuple[int, int]],
                     jobs: Mapping[tuple[str, str], Job]) -> list[Allocation]:
    """What the session hands out: the kubelet's allocations (per container) of every admitted pod. A pod
    that holds nothing exclusive (shared CPU pool) gets one empty whole-pod row: it is on the node all the
    same, and must not be placed again."""
    rows = []
    for p in result.pods:
        if p.status != PodStatus.ADMITTED or not p.node:
            continue
        node_id = seen[p.node][0]
        job = jobs.get((p.namespace, p.job))
        if not p.allocations:
            rows.append(Allocation(cluster_id=session.cluster_id, node_id=node_id, job=job, pod=p.uid,
                                   origin=Allocation.SCHEDULED, session=session))
        for a in p.allocations or ():
            rows.append(Allocation(cluster_id=session.cluster_id, node_id=node_id, job=job, pod=a.pod,
                                   container=a.container or "", cpus=str(a.cpus),
                                   memory={str(n): dict(r) for n, r in sorted(a.memory.items())},
                                   devices={r: list(ids) for r, ids in sorted(a.devices.items())},
                                   origin=Allocation.SCHEDULED, session=session))
    return rows


def _job_reasons(result: SessionResult) -> dict[tuple[str, str], str]:
    """{(namespace, job): why this session did not place it ("" when every pod it ran holds resources)}."""
    first: dict[tuple[str, str], str] = {}
    for p in result.pods:
        if p.status not in (PodStatus.ADMITTED, PodStatus.SKIPPED):
            first.setdefault((p.namespace, p.job), f"pod {p.pod}: {p.message or p.kubelet_reason or p.status}")
    out = {}
    for j in result.jobs:
        key = (j["namespace"], j["job"])
        out[key] = "" if j["committed"] and key not in first else first.get(key, "not placed")
    return out


def _commit(session: SchedulingSession, run: runs.Run, result: SessionResult, seen: Mapping[str, tuple[int, int]],
            job_rows: list[Job], held: Mapping[str, tuple[int, str]], nodes_total: int, engine_ms: float,
            attempt: int) -> None:
    """Write the run's results in one transaction that holds, in order, the session row, the nodes it
    allocates on (still at the generation it read, else StaleNodes) and its jobs. The pods of a job that
    was finished or deleted meanwhile are skipped (checked here, with the job held: a finish either
    landed before and is seen, or waits and then releases what this commit wrote); so is a pod that
    gained an allocation since the run read the cluster, with the reason in its placement; pods that
    held resources before the run are listed as skipped too. Job statuses are then derived afresh.
    Results are written from the engine's objects (store.ResultWriter), never read back."""
    started = time.perf_counter()
    _list_held(result, job_rows, held, nodes_total)
    by_key = {(j.namespace, j.name): j for j in job_rows}
    allocations: list[Allocation] = []
    ended: dict[tuple[str, str], str] = {}
    with transaction.atomic():  # every step below is written together, or nothing is
        # first: this run must still own the row (the update also locks it until the commit)
        if not run.owns().update(heartbeat_at=timezone.now()):
            raise runs.Superseded(f"session {session.pk} was declared lost and taken over; this run writes nothing")
        if not session.dry_run:
            touched = _hold_nodes(result, seen)
            ended = _skip_late_pods(result, job_rows)
            allocations = _allocation_rows(session, result, seen, by_key)
            Node.objects.filter(pk__in=touched).advance()
        store.clear(session)
        store.ResultWriter(session, result, {name: nid for name, (nid, _g) in seen.items()}).save()
        committed = {(j["namespace"], j["job"]) for j in result.jobs if j["committed"] and j["placed"]} - set(ended)
        if not session.dry_run:
            Allocation.objects.bulk_create(allocations, batch_size=BATCH)
            for key, reason in _job_reasons(result).items():
                if key in by_key and key not in ended:
                    Job.objects.filter(pk=by_key[key].pk).update(reason=reason)
            job_services.refresh_status(j.pk for j in job_rows)
        checkpoint("written", session)
        _mark_done(session, result, len(job_rows), len(committed), nodes_total, engine_ms, attempt,
                   time.perf_counter() - started)


def _list_held(result: SessionResult, job_rows: list[Job], held: Mapping[str, tuple[int, str]],
               nodes_total: int) -> None:
    """The pods that held resources before the run, added to its pods as skipped (with where they hold)."""
    by_id = {j.pk: j for j in job_rows}
    result.pods.extend(_skip(PodRecord(pod=uid.partition("/")[2], uid=uid, namespace=by_id[job_id].namespace,
                                       job=by_id[job_id].name, task="", policy="", qos="", nodes_total=nodes_total),
                             why)
                       for uid, (job_id, why) in held.items())


def _hold_nodes(result: SessionResult, seen: Mapping[str, tuple[int, int]]) -> list[int]:
    """Hold the nodes the run allocates on (id order); StaleNodes when one changed since the run read it."""
    names = {nid: name for name, (nid, _g) in seen.items()}
    touched = sorted({seen[p.node][0] for p in result.pods if p.status == PodStatus.ADMITTED and p.node})
    current = inventory.hold_nodes(touched)
    for node_id in touched:
        generation = seen[names[node_id]][1]
        if node_id not in current or current[node_id].generation != generation:
            raise StaleNodes(f"node {names[node_id]} changed while the session ran")
    return touched


def _skip_late_pods(result: SessionResult, job_rows: list[Job]) -> dict[tuple[str, str], str]:
    """Hold the jobs; skip the admitted pods of a job finished or deleted meanwhile (returned: those jobs, with
    what happened) and the pods that gained an allocation since the run read the cluster."""
    live = dict(Job.objects.select_for_update().filter(pk__in=[j.pk for j in job_rows]).order_by("pk")
                .values_list("pk", "finished_at"))
    ended = {(j.namespace, j.name): "was deleted" if j.pk not in live else "was finished"
             for j in job_rows if j.pk not in live or live[j.pk] is not None}
    now_held = _holders(job_rows)
    for p in result.pods:
        if p.status != PodStatus.ADMITTED:
            continue
        if (p.namespace, p.job) in ended:
            _skip(p, f"of job {p.namespace}/{p.job}, which {ended[(p.namespace, p.job)]} while the session ran",
                  again=False)
        elif p.uid in now_held:
            _skip(p, now_held[p.uid][1])
    return ended


def _mark_done(session: SchedulingSession, result: SessionResult, jobs_total: int, jobs_placed: int,
               nodes_total: int, engine_ms: float, attempt: int, commit_s: float) -> None:
    """The session row done, with the run's counts, timings and explanation limits."""
    counts = {**result.counts, "skipped": sum(1 for p in result.pods if p.status == PodStatus.SKIPPED)}
    SchedulingSession.objects.filter(pk=session.pk).update(
        status=SchedulingSession.DONE, finished_at=timezone.now(), attempts=attempt, engine_ms=engine_ms,
        commit_ms=commit_s * 1000, pods_total=counts["pods"],
        pods_placed=counts["placed"], pods_admitted=counts["admitted"],
        jobs_total=jobs_total, jobs_placed=jobs_placed, nodes_total=nodes_total,
        progress_done=counts["pods"], progress_total=counts["pods"], error="", weight=result.weight,
        explain_names=result.explain_names, explain_groups=result.explain_groups, counts=counts,
        timings=dict(result.timings))
