"""The Celery task, and how a question is started: recorded, then queued once committed. Arguments
are ids only; the work and its bookkeeping live in services."""

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from numaweb.scheduling.services import BrokerUnavailable

from . import services
from .models import RoomPlan


# The search stops itself after NUMAWEB_MAKE_ROOM_SECONDS; the task's own limits (from settings) end a
# run that hangs anyway. acks_late + reject_on_worker_lost: a worker that dies mid-question puts the
# message back and the question runs again from scratch (it writes only its own row and, at the end,
# its verifying session).
@shared_task(name="numaweb.run_make_room", acks_late=True, reject_on_worker_lost=True,
             soft_time_limit=settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS,
             time_limit=settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS + 30)
def run_make_room(pk: int) -> str:
    """Answer one make-room question by id; the outcome is on its row."""
    return services.execute(pk).status


def start(fields: dict) -> RoomPlan:
    """Record the question (fields from services.parse_request) and queue it once committed. A broker
    that cannot be reached marks it failed and raises BrokerUnavailable (with `session_id` = its id)."""
    row = RoomPlan.objects.create(**fields)
    if transaction.get_connection().in_atomic_block:
        def later() -> None:
            try:
                enqueue(row.pk)
            except BrokerUnavailable as exc:
                services.mark_failed(row.pk, str(exc))

        transaction.on_commit(later)
        return row
    try:
        enqueue(row.pk)
    except BrokerUnavailable as exc:
        exc.session_id = row.pk
        services.mark_failed(row.pk, str(exc))
        raise
    return row


def enqueue(pk: int) -> None:
    from kombu.exceptions import OperationalError

    RoomPlan.objects.filter(pk=pk).update(queued_at=timezone.now())
    try:
        run_make_room.delay(pk)
    except (OperationalError, ConnectionError, OSError) as exc:
        raise BrokerUnavailable(f"the task queue is unavailable ({exc}); the question was saved as failed and "
                                "can be asked again when the broker is back") from exc
