"""What a worker does besides running sessions, on a thread of its main process, so the database (not the
broker) decides what still has to run:

- publish a heartbeat (its WorkerHeartbeat row) every third of NUMAWEB_WORKER_TIMEOUT;
- mark running sessions whose worker is lost failed (services.expire_lost_sessions);
- queue again every session still pending NUMAWEB_REQUEUE_SECONDS after it was last queued (when the worker
  starts: every one older than a few seconds): a message lost by the broker, or dropped by a Redis restart, only
  delays the session; the same for comparison variants (and running ones whose worker process died on this host).
  A duplicate message is harmless, since a run first claims the row."""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from numaweb.comparisons import services as comparisons

from . import services
from .models import SchedulingSession, WorkerHeartbeat

log = logging.getLogger("numaweb.scheduling")

# a starting worker queues again every session pending longer than this: one queued a moment ago has its message
# on the way, and a duplicate would only be skipped (kept short: the periodic check covers the rest)
START_GRACE = 5.0


def beat(name: str, started_at=None) -> None:
    """Write (or create) this worker's heartbeat row."""
    now = timezone.now()
    updated = WorkerHeartbeat.objects.filter(name=name).update(host=socket.gethostname(), pid=os.getpid(),
                                                               seen_at=now)
    if not updated:
        WorkerHeartbeat.objects.update_or_create(name=name, defaults={
            "host": socket.gethostname(), "pid": os.getpid(), "started_at": started_at or now, "seen_at": now})


def heartbeat_age(host: str, pid: int) -> float | None:
    """Seconds since the worker process `pid` on `host` last beat (None: it never did, or stopped cleanly)."""
    seen = WorkerHeartbeat.objects.filter(host=host, pid=pid).order_by("-seen_at").values_list("seen_at", flat=True)
    last = seen.first()
    return None if last is None else (timezone.now() - last).total_seconds()


def forget(name: str | None = None, host: str | None = None, pid: int | None = None) -> int:
    """Delete a worker's heartbeat (it stopped, or its supervisor saw it die): health turns at once."""
    rows = WorkerHeartbeat.objects.all()
    if name is not None:
        rows = rows.filter(name=name)
    if host is not None and pid is not None:
        rows = rows.filter(host=host, pid=pid)
    return rows.delete()[0]


def requeue_pending(older_than: float) -> list[int]:
    """Queue again every pending session last queued (or touched) more than `older_than` seconds ago. The row's
    updated_at is moved first, conditionally, so of several workers checking at once only one sends it."""
    cutoff = timezone.now() - timedelta(seconds=older_than)
    sent = []
    for pk, updated_at in SchedulingSession.objects.filter(status=SchedulingSession.PENDING,
                                                           updated_at__lte=cutoff).values_list("pk", "updated_at"):
        if not SchedulingSession.objects.filter(pk=pk, status=SchedulingSession.PENDING,
                                                updated_at=updated_at).update(updated_at=timezone.now()):
            continue
        services.enqueue(pk)  # BrokerUnavailable: the next check tries again
        sent.append(pk)
    if sent:
        log.info("queued pending sessions again: %s", ", ".join(map(str, sent)), extra={"sessions": sent})
    return sent


def upkeep(name: str, requeue_after: float) -> None:
    """One round: heartbeat (and the rows of workers gone for a hundred timeouts dropped), lost sessions,
    pending sessions, comparison variants to send again."""
    beat(name)
    gone = timezone.now() - timedelta(seconds=100 * settings.NUMAWEB_WORKER_TIMEOUT)
    WorkerHeartbeat.objects.filter(seen_at__lt=gone).delete()
    lost = services.expire_lost_sessions()
    if lost:
        log.warning("sessions whose worker was lost, marked failed: %s", ", ".join(map(str, lost)))
    requeue_pending(requeue_after)
    comparisons.requeue_pending(requeue_after)


class Housekeeping(threading.Thread):
    """The loop; `stop()` ends it and deletes the heartbeat."""

    def __init__(self, name: str) -> None:
        super().__init__(name="numaweb-housekeeping", daemon=True)
        self.worker_name = name
        self.interval = max(0.5, settings.NUMAWEB_WORKER_TIMEOUT / 3)
        self.stopping = threading.Event()

    def run(self) -> None:
        first = True
        while not self.stopping.is_set():
            try:
                upkeep(self.worker_name, min(START_GRACE, settings.NUMAWEB_REQUEUE_SECONDS) if first
                       else settings.NUMAWEB_REQUEUE_SECONDS)
                first = False
            except Exception:  # database or broker away: log it, the next round tries again
                log.exception("worker housekeeping failed; retrying in %.0f s", self.interval)
            finally:
                close_old_connections()
                connection.close()
            self.stopping.wait(self.interval)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)
        try:
            forget(self.worker_name)
        finally:
            connection.close()
