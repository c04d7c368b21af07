"""The one run lifecycle (numaweb.worker.runs.Kind) as every kind meets it (issue 30): a soft time limit is worded
the same for sessions, comparison variants and make-room questions; the broker-down answer and the cap on
automatic re-runs close a comparison; and a lost session is queued again whoever is watching it (issue 37, row 9:
polling its API once failed it for good)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from numaweb.comparisons import services as comparisons
from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.jobs.models import Job
from numaweb.room import services as room
from numaweb.room import tasks as room_tasks
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker import housekeeping, runs
from tests.web.helpers import make_job, make_node
from tests.web.room_rows import fragmented_rows, gang_job


@pytest.fixture
def sent(monkeypatch):
    """What was sent to the broker, by task name (no worker here: the tests run the tasks themselves)."""
    out: dict[str, list[int]] = {}
    monkeypatch.setattr(runs, "send", lambda task, ids: out.setdefault(task, []).extend(ids))
    return out


def dead_worker() -> str:
    """host:pid of a process of this host that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}"


def three_runs(sent) -> tuple[SchedulingSession, ComparisonVariant, room.RoomPlan]:
    """A pending session, comparison variant and make-room question (one that needs moves: its search checks)."""
    cluster = fragmented_rows()
    job = gang_job()
    session = scheduling.start_session(cluster, "aligned", dry_run=True, jobs=[job])
    comparison = comparisons.start_comparison(cluster, comparisons.parse_variants(cluster, [{"profile": "aligned"}]),
                                              jobs=[job])
    question = room_tasks.start(room.parse_request(cluster, {"job": job.pk}))
    return session, comparison.variants.get(), question


def execute_all(session, variant, question) -> list[str]:
    return [scheduling.execute_session(session.pk).error, comparisons.execute_variant(variant.pk).error,
            room.execute(question.pk).error]


def same_words(errors: list[str]) -> set[str]:
    return {re.sub(r"of [\d.]+ s \(NUMAWEB_\w+\)", "of N s (SETTING)", e) for e in errors}


def test_a_soft_time_limit_reads_the_same_for_every_kind(transactional_db, sent, settings):
    """Checked between steps by the run itself (any pool), and raised by Celery's prefork pool: one wording, each
    kind naming its own task's limit (make room's task has its own, NUMAWEB_MAKE_ROOM_TASK_SECONDS)."""
    settings.NUMAWEB_TASK_SOFT_TIME_LIMIT = 0
    settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS = 0
    rows = three_runs(sent)
    checked = execute_all(*rows)
    assert checked == [f"stopped at the soft time limit of 0 s ({name}); nothing was written" for name in (
        "NUMAWEB_TASK_SOFT_TIME_LIMIT", "NUMAWEB_TASK_SOFT_TIME_LIMIT", "NUMAWEB_MAKE_ROOM_TASK_SECONDS")]
    assert same_words(checked) == {"stopped at the soft time limit of N s (SETTING); nothing was written"}


def test_celerys_soft_time_limit_reads_the_same_for_every_kind(transactional_db, sent, settings, monkeypatch):
    """Make room's copy of the skeleton used to say "SoftTimeLimitExceeded: ..." here."""
    def celery_says_stop(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    for module, name in ((scheduling, "run_session"), (comparisons, "run_variant"), (room, "make_room")):
        monkeypatch.setattr(module, name, celery_says_stop)
    settings.NUMAWEB_TASK_SOFT_TIME_LIMIT, settings.NUMAWEB_MAKE_ROOM_TASK_SECONDS = 3540, 120
    errors = execute_all(*three_runs(sent))
    assert errors[:2] == ["stopped at the soft time limit of 3540 s (NUMAWEB_TASK_SOFT_TIME_LIMIT); nothing was "
                          "written"] * 2
    assert errors[2] == "stopped at the soft time limit of 120 s (NUMAWEB_MAKE_ROOM_TASK_SECONDS); nothing was written"
    assert same_words(errors) == {"stopped at the soft time limit of N s (SETTING); nothing was written"}
    assert {s.status for s in SchedulingSession.objects.all()} == {"failed"}  # make room's session was not written


@pytest.fixture
def cluster3(transactional_db):
    from numaweb.inventory.models import Cluster

    cluster = Cluster.objects.create(name="c")
    make_node(cluster, "n1")
    make_job("j1", cpus="2")
    return cluster


def test_housekeeping_failing_a_comparisons_last_variant_at_the_cap_closes_it(cluster3, sent, settings):
    """The lost-worker path of housekeeping (before, nothing closed the comparison: it read "running" for ever)."""
    settings.NUMAWEB_RUN_MAX_RUNS = 2
    comparison = comparisons.start_comparison(cluster3, comparisons.parse_variants(
        cluster3, [{"profile": "volcano"}, {"profile": "aligned"}]))
    first, last = comparison.variants.order_by("index")
    assert comparisons.execute_variant(first.pk).status == "done"
    ComparisonVariant.objects.filter(pk=last.pk).update(status="running", worker=dead_worker(), runs=2,
                                                        started_at=timezone.now())
    assert housekeeping.recover(60)["comparison variants"] == []  # a worker's round; at the cap: not sent again
    comparison = Comparison.objects.get(pk=comparison.pk)
    last.refresh_from_db()
    assert last.status == "failed" and last.error.endswith("not run again: started 2 times (NUMAWEB_RUN_MAX_RUNS)")
    assert comparison.finished_at is not None and comparison.status == "failed"


def test_a_redelivered_variant_past_the_cap_is_failed_and_closes_the_comparison(cluster3, sent, settings):
    """The other path: the message comes back (acks_late, reject_on_worker_lost) to a variant already started
    NUMAWEB_RUN_MAX_RUNS times on a worker that died."""
    settings.NUMAWEB_RUN_MAX_RUNS = 3
    comparison = comparisons.start_comparison(cluster3, comparisons.parse_variants(cluster3, [{"profile": "aligned"}]))
    variant = comparison.variants.get()
    ComparisonVariant.objects.filter(pk=variant.pk).update(status="running", worker=dead_worker(), runs=3,
                                                           started_at=timezone.now())
    row = comparisons.execute_variant(variant.pk)
    assert (row.status, row.runs) == ("failed", 3) and "(NUMAWEB_RUN_MAX_RUNS)" in row.error
    assert Comparison.objects.get(pk=comparison.pk).status == "failed"


def test_broker_down_fails_every_kind_the_same_way_and_closes_the_comparison(cluster3, monkeypatch):
    def down(task, ids):
        raise runs.BrokerUnavailable("the task queue is unavailable (connection refused)")

    monkeypatch.setattr(runs, "send", down)
    with pytest.raises(runs.BrokerUnavailable):
        comparisons.start_comparison(cluster3, comparisons.parse_variants(cluster3, [{"profile": "aligned"}]))
    with pytest.raises(runs.BrokerUnavailable):
        room_tasks.start(room.parse_request(cluster3, {"shape": {"cpu": "2"}, "count": 1}))
    with pytest.raises(runs.BrokerUnavailable):
        scheduling.start_session(cluster3)
    comparison = Comparison.objects.get()
    assert comparison.status == "failed" and comparison.finished_at is not None
    errors = {comparison.variants.get().error, room.RoomPlan.objects.get().error, SchedulingSession.objects.get().error}
    assert errors == {"the task queue is unavailable (connection refused)"}


def test_a_lost_session_is_queued_again_whoever_watches_it(api, cluster3, sent, settings):
    """Issue 37, row 9: polling the API of a session whose worker died showed it failed and left it there (only an
    unwatched one was re-run by housekeeping). Now the reader is shown why it failed, and it is sent again."""
    lost = dead_worker()
    session = SchedulingSession.objects.create(cluster=cluster3, status="running", runs=1, worker=lost,
                                               started_at=timezone.now(), heartbeat_at=timezone.now())
    session.jobs.set(Job.objects.all())
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["status"] == "failed"
    assert body["error"] == (f"worker lost: {lost} died during the run (killed or crashed); nothing was written; "
                             "queued again automatically")
    assert sent["numaweb.run_scheduling_session"] == [session.pk]
    assert api.get(f"/api/sessions/{session.pk}/").json()["status"] == "failed"  # a second look sends nothing
    assert sent["numaweb.run_scheduling_session"] == [session.pk]
    row = scheduling.execute_session(session.pk)  # the worker takes the message
    assert (row.status, row.runs, row.error, row.pods_placed) == ("done", 2, "", 1)


def test_a_lost_session_at_the_cap_is_not_sent_again_by_a_watcher(api, cluster3, sent, settings):
    settings.NUMAWEB_RUN_MAX_RUNS = 2
    session = SchedulingSession.objects.create(cluster=cluster3, status="running", runs=2, worker=dead_worker(),
                                               started_at=timezone.now() - timedelta(seconds=5))
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["status"] == "failed" and body["error"].endswith("started 2 times (NUMAWEB_RUN_MAX_RUNS)")
    assert sent == {}


def test_comparisons_left_open_by_the_old_housekeeping_are_closed_by_the_migration(transactional_db):
    """comparisons.0004: a comparison whose variants had all ended without closing it (the old housekeeping failed
    its last variant and left it "running") gets its last variant's end; one still running is left alone."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("comparisons", "0003_variant_run_columns")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    from numaweb.inventory.models import Cluster  # migrated to its latest: only the comparisons app went back

    cluster = apps.get_model("inventory", "Cluster").objects.get(pk=Cluster.objects.create(name="old").pk)
    comparison, variant = apps.get_model("comparisons", "Comparison"), apps.get_model("comparisons",
                                                                                       "ComparisonVariant")
    ended = timezone.now() - timedelta(days=3)
    stuck, running = comparison.objects.create(cluster=cluster), comparison.objects.create(cluster=cluster)
    variant.objects.create(comparison=stuck, index=0, profile="volcano", status="done", finished_at=ended)
    variant.objects.create(comparison=stuck, index=1, profile="aligned", status="failed", error="worker lost: x",
                           finished_at=ended)
    variant.objects.create(comparison=running, index=0, profile="volcano", status="running")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert Comparison.objects.get(pk=stuck.pk).finished_at == ended
    assert Comparison.objects.get(pk=stuck.pk).status == "failed"
    assert Comparison.objects.get(pk=running.pk).finished_at is None


def _max_runs(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    from pathlib import Path

    code = "import django; django.setup(); from django.conf import settings; print(settings.NUMAWEB_RUN_MAX_RUNS)"
    return subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], text=True,
                          capture_output=True, timeout=60,
                          env={"NUMAWEB_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "numaweb.settings",
                               "PATH": "/usr/bin:/bin", **env})


def test_the_cap_has_one_setting_for_every_kind_and_its_old_name_still_works(tmp_path):
    assert _max_runs(tmp_path).stdout.strip() == "3"
    assert _max_runs(tmp_path, NUMAWEB_SESSION_MAX_RUNS="5").stdout.strip() == "5"  # documented before: still read
    assert _max_runs(tmp_path, NUMAWEB_SESSION_MAX_RUNS="5", NUMAWEB_RUN_MAX_RUNS="2").stdout.strip() == "2"
    bad = _max_runs(tmp_path, NUMAWEB_SESSION_MAX_RUNS="many")
    assert bad.returncode != 0 and "NUMAWEB_SESSION_MAX_RUNS='many' is not an integer" in bad.stderr
    assert "NUMAWEB_RUN_MAX_RUNS=0 must be at least 1" in _max_runs(tmp_path, NUMAWEB_RUN_MAX_RUNS="0").stderr
