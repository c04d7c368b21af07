"""Make room: rows → engine (`scheduler_core.scheduler.room.make_room`) → rows (MAKE_ROOM.md).

`parse_request` checks a question (naming the field at fault) and the bounds from settings;
`tasks.start` records it and, once committed, queues it for a worker; `execute` (the worker) reads the
cluster, the target and the priorities of the running pods, runs the search with progress, and writes
the verified plan, the node grids before and after, and the dry-run session that verified it (a
`SchedulingSession` row with its placements, so the session page shows it like any other)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any, NotRequired, TypedDict

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.http import QueryDict

from numaweb.comparisons.services import ComparisonError, parse_shape
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.inventory.services import cluster_nodes
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling import store
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker import runs
from scheduler_core.errors import EngineError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.jobs import Job as EngineJob
from scheduler_core.model.node import Allocation as EngineAllocation
from scheduler_core.scheduler.cluster import Cluster as EngineCluster
from scheduler_core.scheduler.explain import PodStatus
from scheduler_core.scheduler.headroom import Shape, ShapeDict
from scheduler_core.scheduler.profiles import PROFILES, get_profile
from scheduler_core.scheduler.room import make_room
from scheduler_core.scheduler.room_moves import Budget, Rules, shape_job
from scheduler_core.scheduler.room_moves import RoomPlan as EnginePlan

from .models import RoomPlan

log = logging.getLogger("numaweb.room")

FIELDS = ("job", "shape", "count", "policy", "profile", "allow_evictions", "protected_namespaces", "max_priority",
          "pinned", "max_moves")


class RoomError(ValueError):
    """Bad input for a make-room question; `field` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


#: a namespace, or a namespace/name pattern with shell wildcards (what protected namespaces and pins are)
NAME_PATTERN = re.compile(r"[A-Za-z0-9._/*?\[\]!-]{1,253}")


def _strings(data: Mapping[str, object], field: str) -> list[str]:
    """A list of names, at most NUMAWEB_MAX_LIST_ITEMS of them (counted before any is looked at)."""
    if field not in data:
        return []
    value = data.get(field)  # an empty text is a list of one empty name, which the schema (and this) refuses
    if value is None:
        raise RoomError(field, "a list of names, not null")
    cap = settings.NUMAWEB_MAX_LIST_ITEMS
    count = value.count(",") + 1 if isinstance(value, str) else len(value) if isinstance(value, list) else 0
    if count > cap:
        raise RoomError(field, f"{count} items, more than the limit of {cap} (NUMAWEB_MAX_LIST_ITEMS)")
    if isinstance(value, str):
        if not isinstance(data, QueryDict):  # a form carries text; a JSON body's list is a list, as documented
            raise RoomError(field, "a list of names")
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) and NAME_PATTERN.fullmatch(v) for v in value):
        raise RoomError(field, "a list of names (or one comma-separated string): namespace/name patterns of "
                               "letters, digits, '.', '_', '-', '/' and the shell wildcards *, ?, [, ], ! "
                               "(at most 253 characters each)")
    return [v for v in value if v]


def _int(data: Mapping[str, object], field: str, low: int, high: int | None) -> int | None:
    value = data.get(field)
    if value in (None, ""):
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RoomError(field, f"must be an integer, not {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise RoomError(field, f"must be an integer, not {value!r}") from None
    if number < low or (high is not None and number > high):
        raise RoomError(field, f"must be from {low} to {high}, not {number}" if high is not None
                        else f"must be at least {low}, not {number}")
    return number


class Busy(RuntimeError):
    """Nothing recorded: too much is waiting already. `retry_after` says when to ask again (seconds); `setting`
    names the limit reached, where one setting is the limit."""

    setting: str | None = None

    @property
    def retry_after(self) -> int:
        raise NotImplementedError


class TooManyQuestions(Busy):
    """A user or a cluster has as many make-room questions waiting or being answered as allowed."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting

    @property
    def retry_after(self) -> int:
        return max(1, settings.NUMAWEB_MAKE_ROOM_SECONDS)


def check_queue(cluster: Cluster, user: User | None) -> None:
    """TooManyQuestions when `user` (None: not counted) has NUMAWEB_MAKE_ROOM_QUEUED_PER_USER questions waiting or
    being answered, or `cluster` NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER: each holds a worker process for up to
    NUMAWEB_MAKE_ROOM_SECONDS, and an unbounded queue of them made everyone's sessions wait."""
    open_rows = RoomPlan.objects.filter(status__in=(RoomPlan.PENDING, RoomPlan.RUNNING))
    limit = settings.NUMAWEB_MAKE_ROOM_QUEUED_PER_USER
    if user is not None and open_rows.filter(requested_by=user).count() >= limit:
        raise TooManyQuestions(f"you have {limit} make-room questions waiting or being answered, the most allowed "
                               "(NUMAWEB_MAKE_ROOM_QUEUED_PER_USER); ask again when one is answered",
                               "NUMAWEB_MAKE_ROOM_QUEUED_PER_USER")
    limit = settings.NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER
    if open_rows.filter(cluster=cluster).count() >= limit:
        raise TooManyQuestions(f"cluster {cluster.name} has {limit} make-room questions waiting or being answered, the "
                               "most allowed (NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER); ask again when one is answered",
                               "NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER")


class RoomOptions(TypedDict):
    allow_evictions: bool
    protected_namespaces: list[str]
    max_priority: int | None
    pinned: list[str]
    max_moves: int
    weight: NotRequired[int]  # the numa-aware weight of the profile asked with
    profile_from: NotRequired[int | None]  # the job's session whose profile it is (None: asked for, or the default)
    profile_source: NotRequired[str]  # in words: "asked for", "the job's last session, ...", "the default..."


class RoomQuestion(TypedDict):
    """A checked question: the RoomPlan row's fields."""

    cluster: Cluster
    job: Job | None
    shape: ShapeDict | None
    count: int
    profile: str
    options: RoomOptions


def parse_request(cluster: Cluster, data: object) -> RoomQuestion:
    """The row's fields for a question `{"job": id}` or `{"shape", "count", "policy"}` plus options;
    RoomError names the field. Bounds: the cluster's nodes (NUMAWEB_MAKE_ROOM_MAX_NODES), the target's
    pods (NUMAWEB_MAKE_ROOM_MAX_PODS) and the moves looked for (NUMAWEB_MAKE_ROOM_MAX_MOVES)."""
    if not isinstance(data, Mapping):
        raise RoomError("job", 'an object: {"job": id} or {"shape": {...}, "count": n, "policy": ...}')
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RoomError(unknown[0], f"unknown field; expected: {', '.join(FIELDS)}")
    nodes = Node.objects.filter(cluster=cluster, removed_at__isnull=True).count()
    if nodes > settings.NUMAWEB_MAKE_ROOM_MAX_NODES:
        raise RoomError("cluster", f"{nodes} nodes; make room answers for at most "
                                   f"{settings.NUMAWEB_MAKE_ROOM_MAX_NODES} (NUMAWEB_MAKE_ROOM_MAX_NODES)")
    has_job, has_shape = data.get("job") not in (None, ""), data.get("shape") not in (None, "", {})
    if has_job == has_shape:
        raise RoomError("job", 'give either "job" (a pending job\'s id) or "shape" with "count", not both or neither')
    job, shape, count = (_target_job(cluster, data), None, 0) if has_job else (None, *_target_shape(data))
    profile, weight, session, source = data.get("profile") or "", 1, None, "asked for"
    if profile and profile not in PROFILES:
        raise RoomError("profile", f"unknown profile {profile!r}; expected one of: {', '.join(PROFILES)}")
    if not profile:  # in the job's own terms: the profile (and weight) of the session that left it pending
        last = last_session(job) if job is not None else None
        if last is not None:
            profile, weight, session = last.profile, last.weight, last.pk
            source = "the job's last session, the one that left it pending"
        else:
            profile, source = "aligned", "the default: no session of the job yet" if job else "the default"
    options = parse_options(data)
    options["weight"], options["profile_from"], options["profile_source"] = weight, session, source
    return RoomQuestion(cluster=cluster, job=job, shape=shape, count=count, profile=profile, options=options)


def last_session(job: Job) -> SchedulingSession | None:
    """The job's last finished session that was asked for (not a make-room check): the one that left it pending."""
    return job.sessions.filter(status=SchedulingSession.DONE, room_check=False).order_by("-id").only(
        "pk", "profile", "weight").first()


def _target_job(cluster: Cluster, data: Mapping[str, object]) -> Job:
    """The pending job of `cluster` a question names, within NUMAWEB_MAKE_ROOM_MAX_PODS."""
    for field in ("count", "policy"):
        if data.get(field) not in (None, ""):
            raise RoomError(field, 'only with "shape"')
    max_pods = settings.NUMAWEB_MAKE_ROOM_MAX_PODS
    job_id = _int(data, "job", 1, None)
    job = Job.objects.filter(pk=job_id).prefetch_related("tasks").first() if job_id is not None else None
    if job is None:
        raise RoomError("job", f"no job {job_id}")
    try:
        job_services.check_cluster([job], cluster)
    except job_services.NotSchedulable as exc:
        raise RoomError("job", str(exc)) from None
    if job.finished_at is not None:
        raise RoomError("job", f"job {job} is finished")
    if job.replicas > max_pods:
        raise RoomError("job", f"job {job} has {job.replicas} pods; make room answers for at most {max_pods} "
                               "(NUMAWEB_MAKE_ROOM_MAX_PODS)")
    return job


def _target_shape(data: Mapping[str, object]) -> tuple[ShapeDict, int]:
    """A question's shape (its policy given at the top level or in it, not both differently) and count."""
    shape_data = data["shape"]
    if isinstance(shape_data, Mapping) and data.get("policy") not in (None, ""):
        if shape_data.get("policy") not in (None, "", data["policy"]):
            raise RoomError("policy", "given twice, differently (top level and in shape)")
        shape_data = {**shape_data, "policy": data["policy"]}
    try:
        shape = parse_shape(shape_data)
    except ComparisonError as exc:
        raise RoomError("shape", str(exc)) from None
    if shape is None:  # only for an empty shape, which parse_request took for no shape
        raise RoomError("shape", "an object with cpu, memory, devices and policy")
    max_pods = settings.NUMAWEB_MAKE_ROOM_MAX_PODS
    count = _int(data, "count", 1, max_pods)
    if count is None:
        raise RoomError("count", f'how many pods of the shape (1 to {max_pods}) with "shape"')
    return shape.to_dict(), count


def parse_options(data: Mapping[str, object]) -> RoomOptions:
    """The search's options, each checked, with the settings' defaults."""
    for field in ("max_priority", "max_moves"):  # JSON numbers (the API takes JSON only, commands pass ints)
        if field in data and (data[field] is None or isinstance(data[field], str)):
            raise RoomError(field, f"must be an integer, not {data[field]!r}")
    evictions = data.get("allow_evictions", False)
    if not isinstance(evictions, bool):
        raise RoomError("allow_evictions", f"must be true or false, not {evictions!r}")
    protected = _strings(data, "protected_namespaces") if "protected_namespaces" in data \
        else list(settings.NUMAWEB_MAKE_ROOM_PROTECTED_NAMESPACES)
    return RoomOptions(allow_evictions=evictions, protected_namespaces=protected,
                       max_priority=_int(data, "max_priority", -(2**31), 2**31 - 1),
                       pinned=_strings(data, "pinned"),
                       max_moves=_int(data, "max_moves", 1, settings.NUMAWEB_MAKE_ROOM_MAX_MOVES)
                       or settings.NUMAWEB_MAKE_ROOM_MAX_MOVES)


# -- running ----------------------------------------------------------------------------------------------
def target_of(row: RoomPlan) -> tuple[EngineJob, set[str]]:
    """The engine job to make room for and the uids of its pods already holding resources."""
    if row.job_id is None:
        shape = Shape.parse(**{k: v for k, v in (row.shape or {}).items() if k in ("cpu", "memory", "devices",
                                                                                   "policy")})
        return shape_job(shape.pod(), row.count, shape.policy), set()
    _rows, jobs = job_services.engine_jobs(Job.objects.filter(pk=row.job_id))
    return jobs[0], job_services.held_pods([row.job_id]).get(row.job_id, set())


def priorities(cluster: Cluster) -> dict[str, int]:
    """Running pods' priorities: their job's (pods without a known job count as 0)."""
    return dict(Allocation.objects.filter(cluster=cluster, job__isnull=False).values_list("pod", "job__priority"))


def rules_of(options: Mapping[str, Any], cluster: Cluster) -> Rules:
    """What may not move: a request's stored options, NUMAWEB_MAKE_ROOM_PINNED (always) and the PodDisruptionBudgets
    of the cluster's last snapshot (as they are when the question runs)."""
    budgets = Cluster.objects.filter(pk=cluster.pk).values_list("disruption_budgets", flat=True).first() or []
    return Rules(protected_namespaces=options.get("protected_namespaces", ()), max_priority=options.get("max_priority"),
                 pinned=(*settings.NUMAWEB_MAKE_ROOM_PINNED, *options.get("pinned", ())),
                 allow_evictions=bool(options.get("allow_evictions")),
                 budgets=tuple(Budget(b["name"], b["allowed"], frozenset(b["pods"])) for b in budgets))


class QuestionRuns(runs.Kind):
    """Make-room questions as runs: what is theirs is their task's time limits (NUMAWEB_MAKE_ROOM_TASK_SECONDS)
    and `consume`, the search and the verified plan with its dry-run session, written together."""

    name = "make-room questions"
    model = RoomPlan
    task = "numaweb.run_make_room"
    log_key = "make_room"
    known_errors = (EngineError,)
    related = ("cluster", "job")

    def soft_limit(self) -> tuple[float, str]:
        return settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS, "NUMAWEB_MAKE_ROOM_TASK_SECONDS"

    def hard_limit(self) -> tuple[float, str]:
        return settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS + 30, "NUMAWEB_MAKE_ROOM_TASK_SECONDS + 30 s"

    def consume(self, row: RoomPlan, run: runs.Run, progress: runs.Progress) -> None:
        """The search keeps its own time (NUMAWEB_MAKE_ROOM_SECONDS); the answer and its verifying session are
        written in one transaction that holds the row, so nobody takes it over meanwhile."""
        started = time.perf_counter()
        nodes, seen = cluster_nodes(row.cluster)
        cluster = EngineCluster(nodes)
        job, held = target_of(row)
        options = row.options or {}
        plan = make_room(cluster, job, get_profile(row.profile, options.get("weight", 1)),
                         rules_of(options, row.cluster), priorities(row.cluster), held,
                         max_moves=options.get("max_moves") or settings.NUMAWEB_MAKE_ROOM_MAX_MOVES,
                         max_checks=settings.NUMAWEB_MAKE_ROOM_MAX_CHECKS,
                         time_limit=settings.NUMAWEB_MAKE_ROOM_SECONDS, progress=progress)
        result: dict[str, Any] = {**plan.to_dict(cluster), "nodes": node_grids(cluster, plan)}  # stored as JSON
        engine_ms = (time.perf_counter() - started) * 1000
        with transaction.atomic():
            if not run.owns().select_for_update().exists():
                raise runs.Superseded(f"make room {row.pk} was declared lost and taken over; this run writes nothing")
            session = _save_session(row, plan, {name: nid for name, (nid, _g) in seen.items()}) if plan.found \
                else None
            if result["after"] is not None:
                result["after"]["session"] = session.pk if session else None
            self.finish(row, run, status=RoomPlan.DONE, result=result, session=session, engine_ms=engine_ms, error="",
                        progress_done=plan.stats.get("checks", 0), progress_total=plan.stats.get("checks", 0))
        log.info("make room %s: %s in %.0f ms", row.pk, "fits now" if plan.fits_now else
                 f"{len(plan.moves)} moves" if plan.found else plan.reason, engine_ms)


QUESTIONS = runs.register(QuestionRuns())


def execute(pk: int) -> RoomPlan:
    """Answer the question now (in a worker): `QUESTIONS.execute` (numaweb.worker.runs.Kind.execute)."""
    row: RoomPlan = QUESTIONS.execute(pk)
    return row


def _save_session(row: RoomPlan, plan: EnginePlan, node_ids: Mapping[str, int]) -> SchedulingSession:
    """The verifying dry run, stored by the scheduling app as a session of its own (store.save_dry_run)."""
    result = plan.check.result if plan.check is not None else None
    if result is None:
        raise ValueError(f"make room {row.pk}: a found plan without the session that verified it")
    return store.save_dry_run(row.cluster_id, row.profile, [row.job_id] if row.job_id else [], result, node_ids,
                              started_at=row.started_at, worker=row.worker, room_check=True)


def _mask(allocations: Iterable[EngineAllocation]) -> int:
    mask = 0
    for a in allocations:
        mask |= a.cpus.mask
    return mask


def node_grids(cluster: EngineCluster, plan: EnginePlan) -> list[dict]:
    """Every node a plan touches (pods taken off or put on, target pods placed), before and after: per
    NUMA node its CPUs, and the CPUs held, moved (off before, on after) and taken by the target after."""
    if plan.check is None or plan.check.result is None or plan.fits_now:
        return []
    after = plan.check.cluster
    moved_uids = {m.pod.uid for m in [*plan.moves, *plan.evictions]}
    target: dict[str, int] = {}
    for p in plan.check.result.pods:
        if p.status == PodStatus.ADMITTED and p.node is not None:
            target[p.node] = target.get(p.node, 0) | p.admitted_cpus()
    names = sorted({m.pod.node for m in [*plan.moves, *plan.evictions]}
                   | {m.to_node for m in plan.moves if m.to_node is not None} | set(target))
    out = []
    for name in names:
        before_node, after_node = cluster.nodes[name], after.nodes[name]
        moved_off = _mask(a for a in before_node.allocations if a.pod in moved_uids)
        moved_on = _mask(a for a in after_node.allocations if a.pod in moved_uids)
        held_before, held_after = _mask(before_node.allocations), _mask(after_node.allocations)
        topo = before_node.topology
        out.append({
            "node": name,
            "numa": [{"id": nid, "cpus": str(CPUSet(mask))} for nid, mask in sorted(topo.numa_cpus.items())],
            "reserved": str(before_node.reserved_cpus),
            "before": {"held": str(CPUSet(held_before & ~moved_off)), "moved": str(CPUSet(moved_off))},
            "after": {"held": str(CPUSet(held_after & ~moved_on & ~target.get(name, 0))),
                      "moved": str(CPUSet(moved_on)), "target": str(CPUSet(target.get(name, 0)))},
        })
    return out
