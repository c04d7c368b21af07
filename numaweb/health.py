"""What /healthz reports and the pages' banner reads: can the database and the broker be reached, and has a
worker sent a heartbeat within NUMAWEB_WORKER_TIMEOUT seconds. Each check answers "ok" or "<state>: <detail>";
anonymous callers see the state only (the detail names internal hosts, ports and folders), signed-in users and
the log see it whole. Only the database and the broker decide the web's readiness: the web serves pages (with the
banner) and queues work while no worker runs, and each worker's own health is probed on it (`check_worker`)."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from numaweb.celery import app
from numaweb.worker.models import WorkerHeartbeat

OK = "ok"
log = logging.getLogger("numaweb.health")


def database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        return f"unreachable: {type(exc).__name__}: {exc}".strip()
    return OK


def broker() -> str:
    """Redis answers PING within the connect timeout; the file-system queue's folder is writable."""

    url = app.conf.broker_url or ""
    if url.startswith("numaweb-fs://"):
        folder = Path(app.conf.broker_transport_options.get("data_folder_in") or "")
        return OK if folder.is_dir() and os.access(folder, os.W_OK) else f"not writable: queue folder {folder}"
    timeout = settings.CELERY_BROKER_CONNECTION_TIMEOUT
    try:
        if url.startswith(("redis://", "rediss://", "unix://")):
            import redis

            client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
            try:
                client.ping()
            finally:
                client.close()
        else:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        return f"unreachable: {type(exc).__name__}: {exc}".strip()
    return OK


def workers() -> dict[str, Any]:
    """Workers whose heartbeat is recent (`alive`), and how long ago any worker was last seen."""

    timeout = settings.NUMAWEB_WORKER_TIMEOUT
    now = timezone.now()
    alive = WorkerHeartbeat.objects.filter(seen_at__gte=now - timedelta(seconds=timeout)).count()
    last = WorkerHeartbeat.objects.order_by("-seen_at").values_list("seen_at", flat=True).first()
    return {"status": OK if alive else f"no worker seen for {timeout} s", "alive": alive,
            "last_seen_seconds": round((now - last).total_seconds(), 1) if last else None, "timeout": timeout}


def workers_alive() -> bool:
    """For the banner: True when a worker has been seen (or the database cannot tell)."""

    since = timezone.now() - timedelta(seconds=settings.NUMAWEB_WORKER_TIMEOUT)
    try:
        return WorkerHeartbeat.objects.filter(seen_at__gte=since).exists()
    except Exception:
        return True


def report(detailed: bool = True) -> tuple[bool, dict[str, Any]]:
    """(ready, body) for /healthz: ready when the database and the broker answer; the workers are reported, and
    without one alive the status is "degraded" (still ready). Without `detailed`, each failing part says its state
    only (and the log has the whole text)."""
    db, queue = database(), broker()
    body: dict[str, Any] = {"database": db, "broker": queue,
                            "workers": workers() if db == OK else {"status": "unknown: the database is unreachable"}}
    ready = db == OK and queue == OK
    for part, text in (("database", db), ("broker", queue)):
        if text != OK:
            log.warning("health: %s %s", part, text)
            if not detailed:
                body[part] = text.partition(":")[0]
    status = "unavailable" if not ready else "ok" if body["workers"]["status"] == OK else "degraded"
    return ready, {"status": status, **body}
