"""Celery tasks. Arguments are ids only; the work and its bookkeeping live in services."""

import logging
import os

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown

from . import services

log = logging.getLogger("numaweb.scheduling")


# acks_late: the message is acknowledged when the session has finished, not when it starts, and
# reject_on_worker_lost: a worker process that dies mid-session (SIGKILL, out of memory) puts the
# message back instead of acknowledging it. The session then runs again from scratch on another
# worker process: its first run never committed, so nothing is half-written (services.execute_session
# takes over a running session only when its worker is lost, and caps the automatic re-runs).
@shared_task(name="numaweb.run_scheduling_session", acks_late=True, reject_on_worker_lost=True)
def run_scheduling_session(session_id: int) -> str:
    """Run one scheduling session by id; the outcome is on the session row."""
    return services.execute_session(session_id).status


@shared_task(name="numaweb.ping", ignore_result=False)
def ping() -> str:
    """A trivial task to check that a worker consumes the queue."""
    return "pong"


_housekeeping: list = []  # the running Housekeeping thread of this worker process, if any


@worker_ready.connect
def _worker_started(sender=None, **_kwargs) -> None:
    """A worker that is ready to consume starts its housekeeping thread: heartbeat, sessions whose worker was
    lost (e.g. the one it replaces after a crash) marked failed, every pending session queued again."""
    from .housekeeping import Housekeeping

    name = getattr(sender, "hostname", None) or services.worker_id()
    pool = getattr(getattr(sender, "controller", None), "pool", None)
    log.info("worker %s started (pid %s, pool %s, concurrency %s)", name, os.getpid(),
             type(pool).__module__.rsplit(".", 1)[-1], getattr(pool, "limit", "?"), extra={"worker": name})
    thread = Housekeeping(name)
    thread.start()
    _housekeeping.append(thread)


@worker_shutdown.connect
def _worker_stopping(**_kwargs) -> None:
    """Stop the housekeeping thread and delete the heartbeat, so /healthz tells at once."""
    while _housekeeping:
        thread = _housekeeping.pop()
        try:
            thread.stop()
        except Exception:  # the database may be gone too: the heartbeat then simply times out
            log.exception("could not delete the heartbeat of worker %s", thread.worker_name)
        log.info("worker %s stopped (pid %s)", thread.worker_name, os.getpid(), extra={"worker": thread.worker_name})
