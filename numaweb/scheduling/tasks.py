"""Celery tasks. Arguments are ids only; the work and its bookkeeping live in services."""

from celery import shared_task

from . import services


# acks_late: the message is acknowledged when the session has finished, not when it starts, and
# reject_on_worker_lost: a worker process that dies mid-session (SIGKILL, out of memory) puts the
# message back instead of acknowledging it. The session then runs again from scratch on another
# worker process: its first run never committed, so nothing is half-written (services.execute_session
# takes over a running session only when its worker is lost, and caps the automatic re-runs at NUMAWEB_RUN_MAX_RUNS).
@shared_task(name="numaweb.run_scheduling_session", acks_late=True, reject_on_worker_lost=True)
def run_scheduling_session(session_id: int) -> str:
    """Run one scheduling session by id; the outcome is on the session row."""
    return services.execute_session(session_id).status
