"""A worker whose pool takes no work ends itself, so that it is replaced (issue 37): one SIGKILL of an idle prefork
pool process can leave the pool wedged — the dead process held the lock of the queue the others read their tasks
from — while the worker's main process goes on heartbeating and receiving tasks that no process ever starts.
Heartbeats cannot tell; work that does not progress can.

`Watch` is a thread of a prefork worker's main process (a solo or threads pool has no such queue; a hung one is
its heartbeat's business): every second it reads Celery's own record of this worker's
tasks (received and waiting, and started). When a task has waited for NUMAWEB_WORKER_STALL_SECONDS while a pool
process was free and nothing started or ended meanwhile, the pool is wedged: the worker deletes its heartbeat (its
health check, `manage.py check_worker`, fails at once), kills its pool processes and exits with code 70. Whatever
keeps it running starts another: `./dev run`'s supervisor (which queues its runs again at once), compose's restart
policy, Kubernetes; the runs it held are failed as lost and queued again, and the tasks it had received but never
started are pending rows, sent again by the next worker's housekeeping."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

from celery.worker import state
from django.conf import settings
from django.db import connection

from . import heartbeats

log = logging.getLogger("numaweb.worker")

EXIT_WEDGED = 70  # EX_SOFTWARE
CHECK_SECONDS = 1.0


class Watch(threading.Thread):
    """Watches the pool of this worker (`concurrency` processes); `stalled(now)` is the decision, `run` acts on it."""

    def __init__(self, name: str, concurrency: int) -> None:
        super().__init__(name="numaweb-stall-watch", daemon=True)
        self.worker_name, self.concurrency = name, max(1, concurrency)
        self.stopping = threading.Event()
        self.mark: tuple[int, frozenset[str]] | None = None
        self.since = time.monotonic()

    def stalled(self, now: float) -> float:
        """Seconds for which a received task has waited while a pool process was free and no task started or ended
        (0 while the pool takes work, or has none to take)."""
        active = frozenset(r.id for r in list(state.active_requests))
        waiting = any(r.id not in active for r in list(state.reserved_requests))
        mark = (state.all_total_count[0], active)
        if mark != self.mark or not waiting or len(active) >= self.concurrency:
            self.mark, self.since = mark, now
        return now - self.since

    def run(self) -> None:
        limit = settings.NUMAWEB_WORKER_STALL_SECONDS
        while not self.stopping.wait(CHECK_SECONDS):
            waited = self.stalled(time.monotonic())
            if waited >= limit:
                self.end(waited)

    def end(self, waited: float) -> None:
        """The wedged worker's way out: heartbeat deleted, pool processes killed, exit code 70."""
        log.error("worker %s: a task waited %.0f s for a free pool process (NUMAWEB_WORKER_STALL_SECONDS is %s s) and "
                  "no task started or ended meanwhile: the pool is wedged (a pool process that died may have held its "
                  "queue's lock); ending this worker so that it is replaced, its runs are queued again",
                  self.worker_name, waited, settings.NUMAWEB_WORKER_STALL_SECONDS,
                  extra={"worker": self.worker_name, "waited": waited})
        try:
            heartbeats.forget(self.worker_name)
        except Exception:  # the database may be away too: the heartbeat then simply times out
            log.exception("could not delete the heartbeat of worker %s", self.worker_name)
        finally:
            connection.close()
        for pid in children(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for handler in logging.getLogger().handlers + log.handlers:
            handler.flush()
        os._exit(EXIT_WEDGED)

    def stop(self) -> None:
        self.stopping.set()


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a prefork pool's)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                out.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
    return out
