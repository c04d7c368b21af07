"""One lifecycle for every row a worker computes (sessions, comparison variants, make-room questions, and what
comes next).

A *kind* (`Kind`, subclassed by the app owning the rows, which registers it for housekeeping) names the model
(its columns: numaweb.worker.models.Run), the Celery task (sent by name: no app imports another's tasks), the
field that marks when a pending row was last queued and, if the row carries one, its heartbeat field. This base
owns the whole lifecycle; a kind writes only what is its own, `consume` (compute, and return or write the
outcome), and `close` when its rows have a parent to close (a comparison, when its last variant ends however it
ends):

- `Kind.queue`: send now, or after the caller's transaction commits; a broker that cannot be reached fails the
  rows (`Kind.broker_failed`, the one broker-down answer; BrokerUnavailable raised only when nobody's commit is
  in the way).
- `Kind.execute` (what the task runs): skip a done row or one running on a live worker, fail a lost one that
  reached the cap, claim it with a conditional update (`claim`, `runs` + 1), run `consume` with a `Progress`
  (throttled progress and heartbeat writes, TimeLimit past the kind's soft limit), and write the outcome or the
  failure, worded one way (`Kind.failure`, `time_limit_reason`). A run owns its row while `worker` and
  `started_at` are still its own (`Run.owns`); every write of its outcome is conditional on that, so a run that
  resumes after being declared lost and superseded commits nothing (Superseded).
- `lost_reason` is the one rule for a lost worker; `Kind.recover` (housekeeping) fails each lost running row
  with its reason and queues it again — unless the hard time limit ended it or it was already started
  NUMAWEB_RUN_MAX_RUNS times — and sends again every pending row whose message may have been lost;
  `Kind.watch` does the same for one row someone is looking at.

Headroom is not a run: it answers inside the request that asks (bounded by NUMAWEB_HEADROOM_SECONDS), so it has
no row, no worker and nothing to recover."""

from __future__ import annotations

import logging
import os
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import group
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import models, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from numaweb.celery import app

from .heartbeats import heartbeat_age, host_silence
from .models import RunStatus

log = logging.getLogger("numaweb.worker")

PENDING, RUNNING, DONE, FAILED = RunStatus.PENDING, RunStatus.RUNNING, RunStatus.DONE, RunStatus.FAILED
STEP_BACK_SECONDS = 2.0  # a run that steps back (Kind.busy) is sent again to run this much later


class BrokerUnavailable(RuntimeError):
    """The row exists but its id could not be queued (broker down); `session_id` names it."""

    session_id: int | None = None


class Superseded(RuntimeError):
    """This run no longer owns its row (it was declared lost and run again): write nothing."""


class TimeLimit(RuntimeError):
    """A run went past its kind's soft time limit: raised by its progress callback between steps (whatever the
    pool), or by Celery's prefork pool as SoftTimeLimitExceeded; `time_limit_reason` words either."""


def time_limit_reason(exc: BaseException, limit: tuple[float, str] | None = None) -> str:
    """The failure message of a run stopped by the soft time limit ("" for any other exception), the same for
    every kind; `limit`: the kind's soft limit and the setting naming it (default NUMAWEB_TASK_SOFT_TIME_LIMIT)."""
    if not isinstance(exc, TimeLimit | SoftTimeLimitExceeded):
        return ""
    seconds, name = limit or (settings.NUMAWEB_TASK_SOFT_TIME_LIMIT, "NUMAWEB_TASK_SOFT_TIME_LIMIT")
    return f"stopped at the soft time limit of {seconds:g} s ({name}); nothing was written"


# -- who runs it, and is it still alive ---------------------------------------------------------------
def worker_id() -> str:
    """This process as a row names its runner: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # killed but not yet reaped by its parent
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return False


def worker_gone(worker: str) -> bool:
    """True when `worker` (host:pid) ran on this host and that process no longer exists. A worker on
    another host is never judged here: only its heartbeat tells."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    return _process_gone(int(pid))


def lost_reason(worker: str, started_at: datetime | None, beat: datetime | None, stale_seconds: float | None,
                now: datetime | None = None, hard: tuple[float, str] | None = None) -> str:
    """Why a running row's worker counts as lost ("" when it may still be working on it): its process is gone
    from this host (ended by the hard time limit when it ran that long), its own heartbeat (a solo worker's
    process beats itself; a prefork pool's child does not) or every worker's on its host stopped for
    NUMAWEB_WORKER_TIMEOUT (hung: stopped or cut off), or the row's own heartbeat `beat` is older
    than `stale_seconds` (None: the kind has no heartbeat of its own). `hard`: the task's hard time limit and
    the setting naming it (default NUMAWEB_TASK_TIME_LIMIT)."""
    now = now or timezone.now()
    if worker and worker_gone(worker):
        limit, name = hard or (settings.NUMAWEB_TASK_TIME_LIMIT, "NUMAWEB_TASK_TIME_LIMIT")
        if started_at and (now - started_at).total_seconds() >= limit:
            return f"stopped at the hard time limit of {limit:g} s ({name}): {worker} was ended; nothing was written"
        return f"worker lost: {worker} died during the run (killed or crashed); nothing was written"
    host, _, pid = worker.rpartition(":") if worker else ("", "", "")
    timeout = settings.NUMAWEB_WORKER_TIMEOUT
    own = heartbeat_age(host, int(pid), now) if host and pid.isdigit() else None  # a solo worker beats itself
    if own is not None and own > timeout:
        return (f"worker lost: {worker} sent no heartbeat for {own:.0f} s (over NUMAWEB_WORKER_TIMEOUT, {timeout} s: "
                "hung or cut off); nothing was written")
    silent = host_silence(host, now) if host else None
    if silent is not None and silent > timeout:
        return (f"worker lost: the worker on {host} sent no heartbeat for {silent:.0f} s (over "
                f"NUMAWEB_WORKER_TIMEOUT, {timeout} s: hung or cut off); nothing was written")
    if stale_seconds is not None and (beat is None or (now - beat).total_seconds() > stale_seconds):
        since = f" since {beat:%Y-%m-%d %H:%M:%S} UTC" if beat else ""
        return (f"worker lost: no heartbeat from {worker or 'its worker'}{since} (over {stale_seconds:.0f} s); "
                "nothing was written")
    return ""


# -- sending -------------------------------------------------------------------------------------------
_tasks_loaded = False


def _load_tasks() -> None:
    """Import every app's tasks module once (and with it its services, which declare the run kinds). Not the
    loader's import_default_modules: its signal makes Celery's Django fixup run django.setup() again, which in
    a worker re-creates the log handlers on Celery's redirected stderr, and the INFO lines are lost."""
    global _tasks_loaded
    if not _tasks_loaded:
        app.autodiscover_tasks(force=True)
        _tasks_loaded = True


def send(task: str, ids: Sequence[int], countdown: float | None = None) -> None:
    """One message per id to the task named `task` (a group when several: the workers run them in parallel), to be
    run `countdown` s from now (None: at once). Raises BrokerUnavailable when the broker cannot be reached."""
    _load_tasks()  # by name: a registered task honours eager mode, an unknown one goes to the broker
    signatures = [app.signature(task, args=(pk,), countdown=countdown) for pk in ids]
    try:
        if len(signatures) == 1:
            signatures[0].apply_async()
        elif signatures:
            group(signatures).apply_async()
    except (OperationalError, ConnectionError, OSError) as exc:
        raise BrokerUnavailable(f"the task queue is unavailable ({exc}); it was saved and can be started again "
                                "when the broker is back") from exc


def queue(send_now: Callable[[], None], failed: Callable[[BrokerUnavailable], None], pk: int) -> None:
    """Send now when the rows are committed; inside an outer transaction, after its commit. A broker failure
    is recorded by `failed` and, when sent now, raised with `session_id` = `pk` (never raised into someone
    else's commit)."""
    if transaction.get_connection().in_atomic_block:
        def later() -> None:
            try:
                send_now()
            except BrokerUnavailable as exc:
                failed(exc)

        transaction.on_commit(later)
        return
    try:
        send_now()
    except BrokerUnavailable as exc:
        exc.session_id = pk
        failed(exc)
        raise


# -- running -------------------------------------------------------------------------------------------
@dataclass
class Run:
    """A claimed row: who runs it and since when. Writes filtered by `owns` land only while it is still this
    run's."""

    model: type[models.Model]
    pk: int
    worker: str
    started_at: datetime

    def owns(self) -> models.QuerySet[models.Model]:
        return self.model._default_manager.filter(pk=self.pk, status=RUNNING, worker=self.worker,
                                                  started_at=self.started_at)

    def finish(self, **fields: Any) -> None:
        """Write the outcome (with finished_at), or raise Superseded when the row is no longer this run's."""
        if not self.owns().update(finished_at=timezone.now(), **fields):
            raise Superseded(f"{self.model._meta.verbose_name} {self.pk} was declared lost and taken over; this run "
                             "writes nothing")


def claim(model: type[models.Model], pk: int, expect: dict[str, Any], **fields: Any) -> Run | None:
    """Take the row (status running, this worker, started now) if it still matches `expect`; None when another
    run took it first."""
    run = Run(model, pk, worker_id(), timezone.now())
    taken = model._default_manager.filter(pk=pk, **expect).update(status=RUNNING, worker=run.worker,
                                                         started_at=run.started_at, finished_at=None, error="",
                                                         progress_done=0, **fields)
    return run if taken else None


class Progress:
    """A run's progress callback: `write(done, total)` at most every `interval` s (and at the end); raises
    TimeLimit past `deadline`; `also(done, total)` hears every call (a command's progress bar)."""

    def __init__(self, write: Callable[[int, int], object], deadline: float, interval: float,
                 also: Callable[[int, int], None] | None = None) -> None:
        self.write, self.deadline, self.interval, self.also = write, deadline, interval, also
        self.last = 0.0

    def __call__(self, done: int, total: int, *args: Any, **kwargs: Any) -> None:
        if self.also is not None:
            self.also(done, total)
        now = time.monotonic()
        if now > self.deadline:
            raise TimeLimit("soft time limit")
        if done < total and now - self.last < self.interval:
            return
        self.last = now
        self.write(done, total)


# -- the lifecycle -----------------------------------------------------------------------------------------
class Kind(ABC):
    """A kind of run, as its app declares it (a subclass, registered for every worker's housekeeping). The
    class attributes say what it is; `consume` (and `close`, for rows with a parent) is all it writes."""

    name: str  # plural, for logs: "sessions"
    log_key = "id"  # the field naming the row's id in JSON log lines ("session" for sessions)
    model: type[Any]  # a numaweb.worker.models.Run
    task: str  # the Celery task's name, called with the row's id
    queued_field = "queued_at"  # when a pending row was last queued
    beat_field: str | None = None  # the row's own heartbeat, if it has one
    related: tuple[str, ...] = ()  # loaded with the row for `consume`
    known_errors: tuple[type[BaseException], ...] = ()  # failures told by their message alone
    progress_interval = 0.5  # seconds between progress writes
    steps_back = False  # runs of this kind step back while another kind's wait (`busy`)

    def stale_seconds(self) -> float | None:
        """How long the row's own heartbeat may be silent (None: it has none)."""
        return None

    def soft_limit(self) -> tuple[float, str]:
        """The soft time limit of this kind's task, and the setting naming it."""
        return settings.NUMAWEB_TASK_SOFT_TIME_LIMIT, "NUMAWEB_TASK_SOFT_TIME_LIMIT"

    def hard_limit(self) -> tuple[float, str]:
        """The hard time limit of this kind's task, and the setting naming it."""
        return settings.NUMAWEB_TASK_TIME_LIMIT, "NUMAWEB_TASK_TIME_LIMIT"

    @staticmethod
    def max_runs() -> int:
        """Automatic starts allowed, for every kind."""
        return int(settings.NUMAWEB_RUN_MAX_RUNS)

    # -- what a kind writes ----------------------------------------------------------------------------------
    @abstractmethod
    def consume(self, row: Any, run: Run, progress: Progress) -> dict[str, Any] | None:
        """Compute the row's answer: the outcome's fields for the base to write (`finish`), or None when the kind
        wrote its outcome itself (in a transaction that checked `run.owns()` first)."""

    def close(self, row: Any) -> None:
        """Close the row's parent if this was its last run; called inside the transaction that wrote the row's end
        (done, failed, lost past the cap, broker down). No parent: nothing."""
        return None

    # -- sending ---------------------------------------------------------------------------------------------
    def send(self, ids: Sequence[int]) -> None:
        if ids:
            self.model._default_manager.filter(pk__in=ids).update(**{self.queued_field: timezone.now()})
            send(self.task, ids)

    def queue(self, ids: Sequence[int], pk: int) -> None:
        """Send `ids` once committed (runs.queue); a broker that cannot be reached fails them (`broker_failed`)
        and, when sent now, raises BrokerUnavailable with `session_id` = `pk`."""
        queue(lambda: self.send(ids), lambda exc: self.broker_failed(ids, exc), pk)

    def broker_failed(self, ids: Sequence[int], exc: Exception) -> None:
        """The broker-down answer: the rows failed with the reason (re-runnable, nothing was lost), parents closed."""
        with transaction.atomic():
            self.model._default_manager.filter(pk__in=ids).update(status=FAILED, error=str(exc),
                                                                  finished_at=timezone.now())
            for row in self.model._default_manager.filter(pk__in=ids):
                self.close(row)

    # -- sharing the workers --------------------------------------------------------------------------------
    def busy(self) -> bool:
        """For a kind that steps back (comparison variants): True while a run of a kind that does not (a session,
        a make-room question) waits and NUMAWEB_VARIANT_SHARE runs of this kind already run. Many variants then
        cannot hold every worker process while a one-pod session waits behind them."""
        if not self.steps_back or app.conf.task_always_eager:  # eager: the caller runs it now, there is no queue
            return False
        if self.model._default_manager.filter(status=RUNNING).count() < settings.NUMAWEB_VARIANT_SHARE:
            return False
        return any(kind.model._default_manager.filter(status=PENDING).exists()
                   for kind in KINDS.values() if not kind.steps_back)

    def step_back(self, pk: int) -> None:
        """Send the row again, to run STEP_BACK_SECONDS from now (it stays pending; its worker process is free at
        once for the run that waits)."""
        self.model._default_manager.filter(pk=pk).update(**{self.queued_field: timezone.now()})
        send(self.task, [pk], countdown=STEP_BACK_SECONDS)
        log.info("%s %s steps back: others wait and %s of its kind run (NUMAWEB_VARIANT_SHARE)", self.name, pk,
                 settings.NUMAWEB_VARIANT_SHARE)

    # -- running ---------------------------------------------------------------------------------------------
    def progress(self, run: Run, also: Callable[[int, int], None] | None = None) -> Progress:
        """The run's progress callback: done/total (and the heartbeat) while it owns the row; TimeLimit past the
        kind's soft limit."""
        beat = {self.beat_field: timezone.now} if self.beat_field else {}
        return Progress(lambda done, total: run.owns().update(
            progress_done=done, progress_total=total, **{k: now() for k, now in beat.items()}),
            time.monotonic() + self.soft_limit()[0], self.progress_interval, also)

    def failure(self, exc: BaseException) -> str:
        """A failed run's error, worded the same for every kind."""
        return time_limit_reason(exc, self.soft_limit()) or (
            str(exc) if isinstance(exc, self.known_errors) else f"{type(exc).__name__}: {exc}") or type(exc).__name__

    def finish(self, row: Any, run: Run, **fields: Any) -> None:
        """Write the outcome (while `run` owns the row, else Superseded) and close the parent, together."""
        with transaction.atomic():
            run.finish(**fields)
            self.close(row)

    def execute(self, pk: int, also: Callable[[int, int], None] | None = None) -> Any:
        """Run the row now (in a worker). Never raises for a run-level failure: the row says it. A done row, or
        one running on a live worker, is left alone (a duplicate delivery); one whose worker is lost is run
        again from scratch, unless it was started NUMAWEB_RUN_MAX_RUNS times (then failed, naming the cap).
        `also(done, total)` hears every progress call (a command's progress bar)."""
        rows = self.model._default_manager.select_related(*self.related)
        row = rows.get(pk=pk)
        if row.status == DONE:
            log.info("%s %s is already done; not running it twice", self.name, pk)
            return row
        if row.status == RUNNING:
            reason = self.lost_reason(row)
            if not reason:
                log.info("%s %s is already running on %s; not running it twice", self.name, pk, row.worker)
                return row
            if row.runs >= self.max_runs():
                self.expire(row, requeue=True)
                return rows.get(pk=pk)
            log.warning("%s %s: %s; running it again from scratch", self.name, pk, reason)
        elif self.busy():
            self.step_back(pk)
            return row
        fields: dict[str, Any] = {self.beat_field: timezone.now()} if self.beat_field else {}
        run = claim(self.model, pk, {"status": row.status, "worker": row.worker, "started_at": row.started_at,
                                     "runs": row.runs}, runs=row.runs + 1, **fields)
        if run is None:
            log.info("%s %s was claimed by another run first", self.name, pk)
            return rows.get(pk=pk)
        row = rows.get(pk=pk)
        started = time.perf_counter()
        try:
            outcome = self.consume(row, run, self.progress(run, also))
        except Superseded as exc:
            log.warning("%s %s: %s", self.name, pk, exc)
            return rows.get(pk=pk)
        except Exception as exc:
            reason = self.failure(exc)
            ms = (time.perf_counter() - started) * 1000
            log.exception("%s %s failed after %.0f ms: %s", self.name, pk, ms, reason,
                          extra={self.log_key: pk, "run": row.runs, "ms": ms})
            outcome = {"status": FAILED, "error": reason}
        if outcome is not None:
            try:
                self.finish(row, run, **outcome)
            except Superseded as exc:
                log.warning("%s %s: %s", self.name, pk, exc)
        return rows.get(pk=pk)

    # -- lost workers ------------------------------------------------------------------------------------------
    def lost_reason(self, row: Any, now: datetime | None = None) -> str:
        if row.status != RUNNING:
            return ""
        if self.beat_field is None:
            return lost_reason(row.worker, row.started_at, None, None, now, self.hard_limit())
        beat = getattr(row, self.beat_field) or row.started_at or getattr(row, self.queued_field)
        return lost_reason(row.worker, row.started_at, beat, self.stale_seconds(), now, self.hard_limit())

    def again(self, row: Any, reason: str) -> bool:
        """Whether a lost row goes back to the queue: not when the hard time limit ended it, nor past the cap."""
        return not reason.startswith("stopped at the hard time limit") and row.runs < self.max_runs()

    def expire(self, row: Any, now: datetime | None = None, requeue: bool = False, resend: bool = False) -> str:
        """End a running row whose worker is lost: the run failed, for the returned reason ("" when not lost, or
        when something else changed the row first: a heartbeat or an outcome that lands first wins). A row that
        may run again (`again`) goes straight back to pending with `requeue` (the reason kept in its error), is
        failed and sent again at once with `resend`, and is failed otherwise; one that may not is failed, naming
        the cap when that is why, and its parent closed."""
        reason = self.lost_reason(row, now)
        if not reason:
            return ""
        same: dict[str, object] = {"worker": row.worker, "started_at": row.started_at}
        if self.beat_field:
            same[self.beat_field] = getattr(row, self.beat_field)
        again = self.again(row, reason)
        outcome: dict[str, object] = {"status": FAILED, "error": reason, "finished_at": timezone.now()}
        if again and (requeue or resend):
            outcome["error"] = f"{reason}; queued again automatically"
            if requeue:
                outcome.update(status=PENDING, finished_at=None)
        elif not again and row.runs >= self.max_runs() and not reason.startswith("stopped at the hard time limit"):
            outcome["error"] = f"{reason}; not run again: started {row.runs} times (NUMAWEB_RUN_MAX_RUNS)"
        with transaction.atomic():
            if not self.model._default_manager.filter(pk=row.pk, status=RUNNING, **same).update(**outcome):
                return ""
            if outcome["status"] == FAILED and not (again and resend):  # its last run: the parent may close
                self.close(row)
        log.warning("%s %s: %s", self.name, row.pk, outcome["error"])
        if again and resend:
            try:
                self.send([row.pk])
            except BrokerUnavailable:  # left for housekeeping, which sends pending rows again
                self.model._default_manager.filter(pk=row.pk, status=FAILED).update(status=PENDING, finished_at=None)
        return reason

    def watch(self, row: Any) -> str:
        """What a reader of one row (its page, the API) does: a running row whose worker is lost is failed with
        the reason, as the reader is shown, and sent again at once when it may run again — whoever is watching,
        a lost run is not failed for good. The row is refreshed."""
        reason = self.expire(row, resend=True)
        row.refresh_from_db()
        return reason

    def recover(self, older_than: float) -> list[int]:
        """Lost running rows failed and queued again (see `expire`, `again`); pending rows last queued more than
        `older_than` s ago sent again. Each row is moved by a conditional update first, so of several workers
        checking at once only one sends it. Returns the ids sent."""
        cutoff = timezone.now() - timedelta(seconds=older_than)
        due: list[tuple[int, Any]] = list(self.model._default_manager.filter(
            status=PENDING, **{f"{self.queued_field}__lte": cutoff}).values_list("pk", self.queued_field))
        for row in self.model._default_manager.filter(status=RUNNING):
            reason = self.expire(row, requeue=True)
            if reason and self.again(row, reason):  # now pending
                due.append((row.pk, None))
        now = timezone.now()
        sent = [pk for pk, queued in due if queued is None or self.model._default_manager.filter(
            pk=pk, status=PENDING, **{self.queued_field: queued}).update(**{self.queued_field: now})]
        if sent:
            self.send(sent)  # BrokerUnavailable: the next check tries again
            log.info("%s queued again: %s", self.name, ", ".join(map(str, sent)), extra={self.name: sent})
        return sent


KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Declare a kind for every worker's housekeeping (its app does, when its services module loads)."""
    KINDS[kind.name] = kind
    return kind


def kinds() -> Iterable[Kind]:
    """Every declared kind (the apps' task modules, and with them their services, loaded first)."""
    _load_tasks()
    return list(KINDS.values())
