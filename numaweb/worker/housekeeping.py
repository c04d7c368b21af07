"""What a worker does besides running tasks, on a thread of its main process, so the database (not the
broker) decides what still has to run:

- publish a heartbeat (heartbeats.beat) every third of NUMAWEB_WORKER_TIMEOUT;
- for every run kind the apps declared (runs.KINDS: sessions, comparison variants, make-room questions): fail
  the running rows whose worker is lost and queue them again, and send again every row still pending
  NUMAWEB_REQUEUE_SECONDS after it was last queued (when the worker starts: every one older than a few
  seconds). A message lost by the broker, or a hung or killed worker, only delays a run; a duplicate message
  is harmless, since a run first claims its row."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from . import heartbeats, runs

log = logging.getLogger("numaweb.worker")

# a starting worker queues again every row pending longer than this: one queued a moment ago has its message
# on the way, and a duplicate would only be skipped (kept short: the periodic check covers the rest)
START_GRACE = 5.0


def recover(requeue_after: float) -> dict[str, list[int]]:
    """Every kind's lost and pending runs (runs.Kind.recover); {kind: ids sent again}. One kind failing (its
    broker or table away) does not keep the others from their turn."""
    sent = {}
    for kind in runs.kinds():
        try:
            sent[kind.name] = kind.recover(requeue_after)
        except Exception:
            log.exception("housekeeping of %s failed; the next round tries again", kind.name)
    return sent


def upkeep(name: str, requeue_after: float) -> dict[str, list[int]]:
    """One round: heartbeat (and the rows of workers gone for a hundred timeouts dropped), then every kind."""
    heartbeats.beat(name)
    heartbeats.drop_ancient()
    return recover(requeue_after)


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
            heartbeats.forget(self.worker_name)
        finally:
            connection.close()
