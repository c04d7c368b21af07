"""The queue ranked, its web side: rows → engine (`scheduler_core.scheduler.defrag.advise`) → rows (MAKE_ROOM.md,
"The queue").

`parse_request` checks the options (make room's, naming the field at fault) and that the cluster has pending jobs;
`tasks.start_defrag` records the run and queues it; `ADVISOR.execute` (the worker) asks make room for each pending
job within NUMAWEB_DEFRAG_SECONDS and writes the ranked jobs, the conflicts and the proposal, with the dry-run
session that verified it (stored like make room's, marked as a make-room check)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, TypedDict

from django.conf import settings
from django.db import transaction

from numaweb.inventory.models import Cluster, Node
from numaweb.inventory.services import cluster_nodes
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling import store
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker import runs
from scheduler_core.errors import EngineError
from scheduler_core.scheduler.cluster import Cluster as EngineCluster
from scheduler_core.scheduler.defrag import advise, job_key
from scheduler_core.scheduler.profiles import PROFILES, get_profile

from .models import DefragRun
from .services import Busy, RoomError, RoomOptions, parse_options, priorities, rules_of

log = logging.getLogger("numaweb.room")

FIELDS = ("profile", "allow_evictions", "protected_namespaces", "max_priority", "pinned", "max_moves")


class DefragQuestion(TypedDict):
    """A checked request: the DefragRun row's fields."""

    cluster: Cluster
    profile: str
    options: RoomOptions


def pending_jobs(cluster: Cluster) -> list[Job]:
    """The jobs the advisor asks about: the cluster's jobs a session would take (not finished, a pod holding
    nothing), highest priority first, then oldest."""
    return sorted(job_services.schedulable_jobs(cluster), key=lambda j: (-j.priority, j.pk))


def parse_request(cluster: Cluster, data: object) -> DefragQuestion:
    """The row's fields for a request of options (all optional: make room's, bar the target); RoomError names the
    field. Refused: a cluster past NUMAWEB_MAKE_ROOM_MAX_NODES, or without pending jobs."""
    data = {} if data == "" else data  # no body at all: every option's default (a JSON null is not an object)
    if not isinstance(data, Mapping):
        raise RoomError("profile", f"an object of options ({', '.join(FIELDS)}), all optional")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RoomError(unknown[0], f"unknown field; expected: {', '.join(FIELDS)}")
    profile = data.get("profile", "")
    if not isinstance(profile, str) or (profile and profile not in PROFILES):
        raise RoomError("profile", f"unknown profile {profile!r}; expected one of: {', '.join(PROFILES)}")
    options = parse_options(data)
    nodes = Node.objects.filter(cluster=cluster, removed_at__isnull=True).count()
    if nodes > settings.NUMAWEB_MAKE_ROOM_MAX_NODES:
        raise RoomError("cluster", f"{nodes} nodes; the advisor answers for at most "
                                   f"{settings.NUMAWEB_MAKE_ROOM_MAX_NODES} (NUMAWEB_MAKE_ROOM_MAX_NODES)")
    pending = pending_jobs(cluster)
    if not pending:
        raise RoomError("cluster", f"cluster {cluster} has no pending jobs: nothing to rank")
    weight, source, session = 1, "asked for", None
    if not profile:  # the queue in its own terms: the profile of the last session that left one of its jobs pending
        last = (SchedulingSession.objects.filter(cluster=cluster, status=SchedulingSession.DONE, room_check=False,
                                                 jobs__in=[j.pk for j in pending])
                .order_by("-id").only("pk", "profile", "weight").first())
        if last is not None:
            profile, weight, session = last.profile, last.weight, last.pk
            source = "the last session of the pending jobs, the one that left them pending"
        else:
            profile, source = "aligned", "the default: no session of the pending jobs yet"
    options["weight"], options["profile_from"], options["profile_source"] = weight, session, source
    return DefragQuestion(cluster=cluster, profile=profile, options=options)


def check_queue(cluster: Cluster) -> None:
    """One advisor run per cluster waits or runs at a time (each may hold a worker for NUMAWEB_DEFRAG_SECONDS)."""
    if DefragRun.objects.filter(cluster=cluster, status__in=(DefragRun.PENDING, DefragRun.RUNNING)).exists():
        raise AdvisorBusy(f"cluster {cluster.name} already has an advisor run waiting or running; ask again when it "
                          "is answered")


class AdvisorBusy(Busy):
    """The cluster's queue is being ranked already; `retry_after` in seconds."""

    @property
    def retry_after(self) -> int:
        return max(1, settings.NUMAWEB_DEFRAG_SECONDS)


class AdvisorRuns(runs.Kind):
    """Advisor runs: their task's time limits (NUMAWEB_DEFRAG_TASK_SECONDS) and `consume`, the ranked queue and
    the verified proposal with its dry-run session, written together."""

    name = "defrag runs"
    model = DefragRun
    task = "numaweb.run_defrag"
    log_key = "defrag"
    known_errors = (EngineError,)
    related = ("cluster",)

    def soft_limit(self) -> tuple[float, str]:
        return settings.NUMAWEB_DEFRAG_TASK_SECONDS, "NUMAWEB_DEFRAG_TASK_SECONDS"

    def hard_limit(self) -> tuple[float, str]:
        return settings.NUMAWEB_DEFRAG_TASK_SECONDS + 30, "NUMAWEB_DEFRAG_TASK_SECONDS + 30 s"

    def consume(self, row: DefragRun, run: runs.Run, progress: runs.Progress) -> None:
        """The pending jobs as they are now (the first NUMAWEB_DEFRAG_MAX_JOBS; jobs of more than
        NUMAWEB_MAKE_ROOM_MAX_PODS pods left out and counted), advised within NUMAWEB_DEFRAG_SECONDS."""
        started = time.perf_counter()
        nodes, seen = cluster_nodes(row.cluster)
        cluster = EngineCluster(nodes)
        pending = pending_jobs(row.cluster)
        fitting = [j for j in pending if j.replicas <= settings.NUMAWEB_MAKE_ROOM_MAX_PODS]
        chosen = fitting[:settings.NUMAWEB_DEFRAG_MAX_JOBS]
        rows, jobs = job_services.engine_jobs(Job.objects.filter(pk__in=[j.pk for j in chosen]))
        order = {j.pk: i for i, j in enumerate(chosen)}
        jobs = [job for _r, job in sorted(zip(rows, jobs, strict=True), key=lambda rj: order[rj[0].pk])]
        ids = {f"{r.namespace}/{r.name}": r.pk for r in rows}
        holding = job_services.held_pods(ids.values())
        held = {key: holding[pk] for key, pk in ids.items() if pk in holding}
        options = row.options or {}
        advice = advise(cluster, jobs, get_profile(row.profile, options.get("weight", 1)),
                        rules_of(options, row.cluster), priorities(row.cluster), held,
                        max_moves=options.get("max_moves") or settings.NUMAWEB_MAKE_ROOM_MAX_MOVES,
                        time_limit=settings.NUMAWEB_DEFRAG_SECONDS, job_time_limit=settings.NUMAWEB_DEFRAG_JOB_SECONDS,
                        max_checks=settings.NUMAWEB_DEFRAG_MAX_CHECKS, progress=progress)
        result: dict[str, Any] = dict(advice.to_dict(cluster))  # stored as JSON
        for entry in result["jobs"]:
            entry["name"], entry["job"] = entry["job"], ids[entry["job"]]
            entry["conflicts"] = [ids[key] for key in entry["conflicts"]]
        proposal = result["proposal"]
        proposal["jobs"] = [ids[key] for key in proposal["jobs"]]
        result["left_out"] = {"max_jobs": len(fitting) - len(chosen), "max_pods": len(pending) - len(fitting)}
        engine_ms = (time.perf_counter() - started) * 1000
        with transaction.atomic():
            if not run.owns().select_for_update().exists():
                raise runs.Superseded(f"defrag {row.pk} was declared lost and taken over; this run writes nothing")
            session = None
            if advice.result is not None and advice.proposal:
                session = store.save_dry_run(row.cluster_id, row.profile, [ids[job_key(j)] for j in advice.proposal],
                                             advice.result, {name: nid for name, (nid, _g) in seen.items()},
                                             started_at=row.started_at, worker=row.worker, room_check=True)
                proposal["after"]["session"] = session.pk
            self.finish(row, run, status=DefragRun.DONE, result=result, session=session, engine_ms=engine_ms,
                        error="", progress_done=len(advice.jobs), progress_total=len(jobs))
        log.info("defrag %s: %d jobs ranked, %d proposed (%d moves) in %.0f ms", row.pk, len(advice.jobs),
                 len(advice.proposal), len(advice.moves), engine_ms)


ADVISOR = runs.register(AdvisorRuns())


def defrag_dict(row: DefragRun) -> dict[str, Any]:
    """The run, its progress and, once done, the ranked jobs and the proposal (the API's answer)."""
    result = row.result or {}
    options = row.options or {}
    return {
        "id": row.pk, "cluster": row.cluster_id, "profile": row.profile, "weight": options.get("weight", 1),
        "profile_from": options.get("profile_from"), "profile_source": options.get("profile_source", "asked for"),
        "options": options, "status": row.status, "error": row.error,
        "progress": {"done": row.progress_done, "total": row.progress_total},
        "created_at": row.created_at, "started_at": row.started_at, "finished_at": row.finished_at,
        "engine_ms": row.engine_ms, "jobs": result.get("jobs", []), "proposal": result.get("proposal"),
        "stopped": result.get("stopped"), "left_out": result.get("left_out"),
    }
