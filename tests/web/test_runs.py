"""The one run abstraction (numaweb.worker.runs) as each kind meets it: a run whose worker went silent (a
SIGSTOPped worker: alive, no heartbeat) is failed and queued again by another worker's housekeeping, and when the
stopped run resumes it writes nothing — for scheduling sessions, comparison variants and make-room questions
alike. (tests/worker/test_commit.py has the same for a session declared lost by its own row's heartbeat.)"""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from numaweb.comparisons import services as comparisons
from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.inventory.models import Allocation, Cluster
from numaweb.room import services as room
from numaweb.room import tasks as room_tasks
from numaweb.room.models import RoomPlan
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import Placement, SchedulingSession
from numaweb.worker import housekeeping, runs
from numaweb.worker.models import WorkerHeartbeat
from tests.web.helpers import make_job, make_node

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: rows are queued after them


@pytest.fixture
def sent(monkeypatch):
    """What was sent to the broker, by task name."""
    out: dict[str, list[int]] = {}
    monkeypatch.setattr(runs, "send", lambda task, ids: out.setdefault(task, []).extend(ids))
    return out


@pytest.fixture
def cluster(settings):
    settings.NUMAWEB_WORKER_TIMEOUT = 30
    cluster = Cluster.objects.create(name="c")
    make_node(cluster, "n1")
    make_job("j1", cpus="2")
    return cluster


def stop_this_worker() -> None:
    """As another worker sees a SIGSTOPped one: its host's heartbeat older than NUMAWEB_WORKER_TIMEOUT."""
    old = timezone.now() - timedelta(seconds=45)
    WorkerHeartbeat.objects.create(name="stopped@here", host=socket.gethostname(), pid=1, started_at=old, seen_at=old)


def other_worker_checks() -> dict[str, list[int]]:
    """One round of a live worker's housekeeping (its own heartbeat is on another host)."""
    return housekeeping.recover(60)


def test_a_stopped_workers_session_is_failed_queued_again_and_its_resumed_run_writes_nothing(cluster, sent,
                                                                                            monkeypatch):
    session = scheduling.start_session(cluster, "volcano")
    assert sent == {"numaweb.run_scheduling_session": [session.pk]}

    def stopped(stage, s):
        if stage == "computed":  # the worker is stopped here; meanwhile another one checks
            stop_this_worker()
            assert other_worker_checks()["sessions"] == [s.pk]

    monkeypatch.setattr(scheduling, "checkpoint", stopped)
    scheduling.execute_session(session.pk)  # ... and resumes, to commit what it computed
    session.refresh_from_db()
    assert session.status == "pending" and session.runs == 1
    assert session.error.startswith(f"worker lost: the worker on {socket.gethostname()} sent no heartbeat for 45 s")
    assert session.error.endswith("queued again automatically")
    assert sent["numaweb.run_scheduling_session"] == [session.pk, session.pk]
    assert not Placement.objects.exists() and not Allocation.objects.exists()

    WorkerHeartbeat.objects.all().delete()  # the stopped worker was replaced; the new one runs the message
    monkeypatch.setattr(scheduling, "checkpoint", lambda stage, s: None)
    scheduling.execute_session(session.pk)
    session.refresh_from_db()
    assert (session.status, session.runs, session.error) == ("done", 2, "")
    assert Allocation.objects.count() == 1


def test_a_stopped_workers_variant_is_failed_queued_again_and_its_resumed_run_writes_nothing(cluster, sent,
                                                                                            monkeypatch):
    comparison = comparisons.start_comparison(cluster, comparisons.parse_variants(cluster, [{"profile": "aligned"}]))
    [variant] = comparison.variants.all()
    real = comparisons.run_variant

    def stopped(*args, **kwargs):
        out = real(*args, **kwargs)
        stop_this_worker()
        assert other_worker_checks()["comparison variants"] == [variant.pk]
        return out

    monkeypatch.setattr(comparisons, "run_variant", stopped)
    row = comparisons.execute_variant(variant.pk)
    assert row.status == "pending" and row.metrics == {} and row.finished_at is None
    assert row.error.startswith("worker lost: the worker on ") and row.error.endswith("queued again automatically")
    assert sent["numaweb.run_comparison_variant"] == [variant.pk, variant.pk]
    assert Comparison.objects.get(pk=comparison.pk).finished_at is None

    WorkerHeartbeat.objects.all().delete()
    monkeypatch.setattr(comparisons, "run_variant", real)
    row = comparisons.execute_variant(variant.pk)
    assert row.status == "done" and row.metrics["pods"] == 1
    assert Comparison.objects.get(pk=comparison.pk).finished_at is not None


def test_a_stopped_workers_question_is_failed_queued_again_and_its_resumed_run_writes_nothing(cluster, sent,
                                                                                             monkeypatch):
    question = room_tasks.start(room.parse_request(cluster, {"shape": {"cpu": "2"}, "count": 1}))
    real = room.make_room

    def stopped(*args, **kwargs):
        out = real(*args, **kwargs)
        stop_this_worker()
        assert other_worker_checks()["make-room questions"] == [question.pk]
        return out

    monkeypatch.setattr(room, "make_room", stopped)
    row = room.execute(question.pk)
    assert row.status == "pending" and row.result is None and row.session_id is None
    assert row.error.endswith("queued again automatically")
    assert sent["numaweb.run_make_room"] == [question.pk, question.pk]
    assert not SchedulingSession.objects.exists()  # its verifying session was not written either

    WorkerHeartbeat.objects.all().delete()
    monkeypatch.setattr(room, "make_room", real)
    assert room.execute(question.pk).status == RoomPlan.DONE


def test_a_run_on_a_live_worker_is_left_alone_and_a_duplicate_message_does_not_take_it(cluster, sent):
    """A duplicate delivery of a variant that a live worker (beating, on another host) runs: not run twice."""
    comparison = comparisons.start_comparison(cluster, comparisons.parse_variants(cluster, [{"profile": "aligned"}]))
    [variant] = comparison.variants.all()
    now = timezone.now()
    WorkerHeartbeat.objects.create(name="busy@elsewhere", host="elsewhere", pid=5, started_at=now, seen_at=now)
    ComparisonVariant.objects.filter(pk=variant.pk).update(status="running", worker="elsewhere:6", started_at=now)
    assert other_worker_checks()["comparison variants"] == []
    row = comparisons.execute_variant(variant.pk)
    assert (row.status, row.worker) == ("running", "elsewhere:6")


def test_finding_the_kinds_leaves_the_log_handlers_alone(monkeypatch):
    """The tasks modules are imported without Celery's import signal, whose Django fix-up would configure logging
    again: in a worker the new handlers would write to Celery's redirected stderr, and INFO lines were lost."""
    import logging

    monkeypatch.setattr(runs, "_tasks_loaded", False)
    before = list(logging.getLogger("numaweb").handlers)
    assert {"sessions", "comparison variants", "make-room questions"} <= {k.name for k in runs.kinds()}
    assert logging.getLogger("numaweb").handlers == before
