"""The Celery task, and how a question is started: recorded, then queued once committed. Arguments
are ids only; the work and its bookkeeping live in services."""

from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from numaweb.inventory.models import Cluster

from . import defrag, services
from .models import DefragRun, RoomPlan


# The search stops itself after NUMAWEB_MAKE_ROOM_SECONDS; the task's own limits (from settings, the same the
# run kind words its failures with: services.QuestionRuns) end a run that hangs anyway. acks_late +
# reject_on_worker_lost: a worker that dies mid-question puts the message back and the question runs again from
# scratch, up to NUMAWEB_RUN_MAX_RUNS starts (it writes only its own row and, at the end, its verifying session).
@shared_task(name="numaweb.run_make_room", acks_late=True, reject_on_worker_lost=True,
             soft_time_limit=settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS,
             time_limit=settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS + 30)
def run_make_room(pk: int) -> str:
    """Answer one make-room question by id; the outcome is on its row."""
    return services.execute(pk).status


def start(fields: services.RoomQuestion, user: object = None) -> RoomPlan:
    """Record the question (fields from services.parse_request), asked by `user`, and queue it once committed.
    services.TooManyQuestions when the user or the cluster already has as many questions waiting or being answered
    as allowed (nothing recorded). A broker that cannot be reached marks it failed and raises BrokerUnavailable
    (with `session_id` = its id)."""
    asker = user if isinstance(user, User) else None  # anonymous or a command: not counted per user
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=fields["cluster"].pk).exists()  # askers of a cluster take turns
        services.check_queue(fields["cluster"], asker)
        row = RoomPlan.objects.create(**fields, requested_by=asker)
    services.QUESTIONS.queue([row.pk], row.pk)
    return row


# The advisor keeps its own time (NUMAWEB_DEFRAG_SECONDS); its task's limits end a run that hangs anyway. Like a
# question, a run whose worker dies goes back to the queue and starts again from scratch.
@shared_task(name="numaweb.run_defrag", acks_late=True, reject_on_worker_lost=True,
             soft_time_limit=settings.NUMAWEB_DEFRAG_TASK_SECONDS,
             time_limit=settings.NUMAWEB_DEFRAG_TASK_SECONDS + 30)
def run_defrag(pk: int) -> str:
    """Rank one cluster's pending queue by id; the outcome is on its row."""
    row: DefragRun = defrag.ADVISOR.execute(pk)
    return row.status


def start_defrag(fields: defrag.DefragQuestion, user: object = None) -> DefragRun:
    """Record an advisor run (fields from defrag.parse_request), asked by `user`, and queue it once committed.
    defrag.AdvisorBusy when the cluster has one waiting or running already (nothing recorded); BrokerUnavailable as
    for `start`."""
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=fields["cluster"].pk).exists()  # askers of a cluster take turns
        defrag.check_queue(fields["cluster"])
        row = DefragRun.objects.create(**fields, requested_by=user if isinstance(user, User) else None)
    defrag.ADVISOR.queue([row.pk], row.pk)
    return row
