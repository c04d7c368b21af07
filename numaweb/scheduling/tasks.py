"""Celery tasks. Arguments are ids only; the work and its bookkeeping live in services."""

import logging

from celery import shared_task
from celery.signals import worker_ready

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


@worker_ready.connect
def _expire_lost_sessions(**_kwargs) -> None:
    """A starting worker marks sessions whose worker is lost (e.g. the one it replaces after a crash,
    whose message the file-system queue does not re-deliver) failed with the reason, so they can be re-run."""
    try:
        lost = services.expire_lost_sessions()
    except Exception:  # the database may not be migrated yet: never keep the worker from starting
        log.exception("could not check for sessions whose worker was lost")
        return
    if lost:
        log.warning("sessions whose worker was lost, marked failed: %s", ", ".join(map(str, lost)))
