"""`manage.py check_worker [--host H]`: the health check of one worker, the one on this host (a compose
container's own hostname): exit 0 when its heartbeat is younger than NUMAWEB_WORKER_TIMEOUT, 1 (saying why)
otherwise. One query on the heartbeat table: no broker round trip, nothing asked of any other worker (Celery's
`inspect ping` answers when any worker does).

A worker whose pool is wedged (numaweb.worker.stall) deletes its heartbeat before it exits, so this check fails
for it at once. What to do with an unhealthy worker: replace it. Its sessions, comparison variants and make-room
questions are failed and queued again by the others' housekeeping once its heartbeat is older than the timeout, and
whatever it would write on waking is refused (a run writes only while it still owns its row), so killing it loses
nothing.
Kubernetes does that with this command as a liveness probe; docker compose only marks the container unhealthy
(restart it, or run an autoheal container); `./dev run`'s supervisor does it itself."""

from __future__ import annotations

import socket
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from numaweb.worker.models import WorkerHeartbeat


class Command(BaseCommand):
    help = "Exit 0 when the worker on this host sent a heartbeat within NUMAWEB_WORKER_TIMEOUT, else 1."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=None, help="the worker's host name (default: this host's)")

    def handle(self, *args: Any, host: str | None, **options: Any) -> None:
        from django.utils import timezone

        host = host or socket.gethostname()
        timeout = settings.NUMAWEB_WORKER_TIMEOUT
        last = (WorkerHeartbeat.objects.filter(host=host).order_by("-seen_at")
                .values_list("seen_at", flat=True).first())
        if last is None:
            raise CommandError(f"no worker heartbeat from host {host}", returncode=1)
        age = (timezone.now() - last).total_seconds()
        if age > timeout:
            raise CommandError(f"the worker on {host} sent no heartbeat for {age:.0f} s (timeout {timeout} s)",
                               returncode=1)
        self.stdout.write(f"ok: the worker on {host} beat {age:.1f} s ago")
