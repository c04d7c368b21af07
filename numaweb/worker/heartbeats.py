"""Worker heartbeats: a WorkerHeartbeat row per Celery worker, written by its housekeeping thread every third
of NUMAWEB_WORKER_TIMEOUT and deleted when it stops. In the database because the web and the workers share
nothing else (in docker-compose they are separate containers)."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from .models import WorkerHeartbeat


def beat(name: str, started_at: datetime | None = None) -> None:
    """Write (or create) this worker's heartbeat row."""
    now = timezone.now()
    updated = WorkerHeartbeat.objects.filter(name=name).update(host=socket.gethostname(), pid=os.getpid(),
                                                               seen_at=now)
    if not updated:
        WorkerHeartbeat.objects.update_or_create(name=name, defaults={
            "host": socket.gethostname(), "pid": os.getpid(), "started_at": started_at or now, "seen_at": now})


def drop_ancient() -> None:
    """Forget workers gone for a hundred timeouts (a crashed worker never deletes its row)."""
    gone = timezone.now() - timedelta(seconds=100 * settings.NUMAWEB_WORKER_TIMEOUT)
    WorkerHeartbeat.objects.filter(seen_at__lt=gone).delete()


def heartbeat_age(host: str, pid: int, now: datetime | None = None) -> float | None:
    """Seconds since the worker process `pid` on `host` last beat (None: it never did, or stopped cleanly)."""
    seen = WorkerHeartbeat.objects.filter(host=host, pid=pid).order_by("-seen_at").values_list("seen_at", flat=True)
    last = seen.first()
    return None if last is None else ((now or timezone.now()) - last).total_seconds()


def host_silence(host: str, now: datetime | None = None) -> float | None:
    """Seconds since any worker on `host` last beat (None: no worker there ever published one)."""
    last = WorkerHeartbeat.objects.filter(host=host).aggregate(last=Max("seen_at"))["last"]
    return None if last is None else ((now or timezone.now()) - last).total_seconds()


def forget(name: str | None = None, host: str | None = None, pid: int | None = None) -> int:
    """Delete a worker's heartbeat (it stopped, or its supervisor saw it die): health turns at once."""
    rows = WorkerHeartbeat.objects.all()
    if name is not None:
        rows = rows.filter(name=name)
    if host is not None and pid is not None:
        rows = rows.filter(host=host, pid=pid)
    return rows.delete()[0]
