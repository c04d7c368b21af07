"""Celery tasks. Arguments are ids only; the work and its bookkeeping live in services."""

from celery import shared_task

from . import services


@shared_task(name="numaweb.run_scheduling_session")
def run_scheduling_session(session_id: int) -> str:
    """Run one scheduling session by id; the outcome is on the session row."""
    return services.execute_session(session_id).status


@shared_task(name="numaweb.ping", ignore_result=False)
def ping() -> str:
    """A trivial task to check that a worker consumes the queue."""
    return "pong"
