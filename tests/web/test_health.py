"""/healthz (the web's readiness, which no worker outage takes away), worker heartbeats and the database-driven
queue (housekeeping), and the logs an operator reads."""

from __future__ import annotations

import base64
import io
import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from numaweb.inventory.models import Cluster
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker import heartbeats, housekeeping
from numaweb.worker.models import WorkerHeartbeat
from tests.web.helpers import filesystem_broker, use_broker


def queued_ids(folder: Path) -> list[int]:
    """Session ids waiting in a file-system queue (kombu writes one JSON file a message, body base64)."""
    ids = []
    for f in folder.glob("*.msg"):
        args = json.loads(base64.b64decode(json.loads(f.read_text())["body"]))[0]
        ids.append(args[0])
    return sorted(ids)


@pytest.fixture
def queue(tmp_path):
    """A private file-system queue; `queue()` lists the session ids waiting in it."""
    with filesystem_broker(tmp_path / "broker"):
        yield lambda: queued_ids(tmp_path / "broker")


def heartbeat(name: str = "w1@host", age: float = 0.0) -> WorkerHeartbeat:
    seen = timezone.now() - timedelta(seconds=age)
    return WorkerHeartbeat.objects.create(name=name, host="host", pid=1, started_at=seen, seen_at=seen)


def test_healthz_ready_without_a_worker_reports_the_workers_in_its_body(client, anon_client, db, queue, settings):
    """The web's readiness probe: no live worker is "degraded" in the body, never 503 (a worker outage must not take
    the web out of service: its pages say so with the banner, and it still queues work)."""
    settings.NUMAWEB_WORKER_TIMEOUT = 5
    r = client.get("/healthz")
    assert r.status_code == 200, r.content
    # the liveness probe asks only whether this process serves requests
    assert client.get("/healthz?live").status_code == 200 and client.get("/healthz?live").json() == {"status": "ok"}
    body = r.json()
    assert body["status"] == "degraded" and body["database"] == "ok" and body["broker"] == "ok"
    assert body["workers"] == {"status": "no worker seen for 5 s", "alive": 0, "last_seen_seconds": None,
                               "timeout": 5}
    old = heartbeat("old@host", age=6)
    r = client.get("/healthz")  # seen, but longer ago than the timeout
    assert r.status_code == 200 and r.json()["status"] == "degraded" and r.json()["workers"]["alive"] == 0
    heartbeats.beat("new@host")
    r = client.get("/healthz")
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "ok"
    assert r.json()["workers"]["alive"] == 1 and r.json()["workers"]["status"] == "ok"
    assert r.headers["Cache-Control"].startswith("max-age=0")
    heartbeats.forget("new@host")
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "degraded"
    assert r.json()["workers"]["last_seen_seconds"] >= 6
    # HEAD is answered as GET (load balancers probe with it), with no body; other methods are refused
    head = anon_client.head("/healthz")
    assert head.status_code == 200 and head.content == b"" and head["Content-Type"] == "application/json"
    old.delete()
    assert client.post("/healthz").status_code == 405


def test_with_no_worker_alive_the_web_stays_ready_and_pages_carry_the_banner(client, anon_client, db, queue):
    """Every worker stopped: readiness 200 (anonymous, as the probes ask), and the pages are served with the banner
    saying no worker runs."""
    from numaweb.inventory.demo import build_demo

    build_demo("demo")
    assert not WorkerHeartbeat.objects.exists()
    probe = anon_client.get("/healthz")
    assert probe.status_code == 200 and probe.json()["status"] == "degraded"
    assert probe.json()["workers"]["alive"] == 0
    assert anon_client.head("/healthz").status_code == 200
    for url in ("/", "/jobs/", "/sessions/", "/comparisons/"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert 'id="no-worker"' in page.content.decode(), url


def test_healthz_503_names_an_unreachable_broker(client, anon_client, db, caplog):
    heartbeat()
    with use_broker("redis://127.0.0.1:1/0"):  # nothing listens on port 1
        r = client.get("/healthz")
        anonymous = anon_client.get("/healthz")
    assert r.status_code == 503
    assert r.json()["broker"].startswith("unreachable: ") and r.json()["database"] == "ok"
    assert "127.0.0.1:1" in r.json()["broker"] or "Connection refused" in r.json()["broker"]
    # anonymous callers learn which part is down, not where it lives; the log has it all
    assert anonymous.status_code == 503 and anonymous.json()["broker"] == "unreachable"
    assert "127.0.0.1" not in anonymous.content.decode()
    assert any("health: broker unreachable: " in m for m in caplog.messages)


def test_healthz_503_names_an_unreachable_database(client, db, monkeypatch):
    from numaweb import health

    heartbeat()

    def broken() -> str:
        return "unreachable: OperationalError: connection refused"

    monkeypatch.setattr(health, "database", broken)
    r = client.get("/healthz")
    assert r.status_code == 503
    assert r.json()["database"].startswith("unreachable") and r.json()["workers"]["status"].startswith("unknown")


def test_requeue_sends_pending_sessions_once_and_only_when_due(db, queue):
    cluster = Cluster.objects.create(name="c")
    waiting = SchedulingSession.objects.create(cluster=cluster)
    SchedulingSession.objects.create(cluster=cluster, status=SchedulingSession.DONE)
    SchedulingSession.objects.create(cluster=cluster, status=SchedulingSession.FAILED)
    assert services.SESSIONS.recover(60) == []  # queued just now: not due yet
    assert queue() == []
    assert services.SESSIONS.recover(0) == [waiting.pk]
    assert queue() == [waiting.pk]
    # its updated_at moved, so a second check in the same moment (another worker) does not send it again
    assert services.SESSIONS.recover(5) == []
    assert queue() == [waiting.pk]


def test_upkeep_beats_fails_lost_sessions_and_queues_them_again(db, queue, settings):
    settings.NUMAWEB_SESSION_STALE_SECONDS = 10
    cluster = Cluster.objects.create(name="c")
    pending = SchedulingSession.objects.create(cluster=cluster)
    long_ago = timezone.now() - timedelta(seconds=60)
    lost = SchedulingSession.objects.create(cluster=cluster, status=SchedulingSession.RUNNING, runs=1,
                                            worker="elsewhere:1", started_at=long_ago, heartbeat_at=long_ago)
    heartbeat("recent@host", age=60)
    heartbeat("ancient@host", age=100 * 30 + 1)
    settings.NUMAWEB_WORKER_TIMEOUT = 30
    sent = housekeeping.upkeep("me@host", 0)
    assert WorkerHeartbeat.objects.get(name="me@host").seen_at > long_ago
    assert sorted(WorkerHeartbeat.objects.values_list("name", flat=True)) == ["me@host", "recent@host"]
    lost.refresh_from_db()
    # failed with the reason, and queued again at once (its first run wrote nothing)
    assert lost.status == "pending" and lost.error.startswith("worker lost: no heartbeat from elsewhere:1")
    assert lost.error.endswith("; queued again automatically") and lost.finished_at is None
    assert sorted(sent["sessions"]) == queue() == sorted([pending.pk, lost.pk])
    assert set(sent) == {"sessions", "comparison variants", "make-room questions", "defrag runs"}  # every app's kind


def test_pending_session_that_lost_its_message_is_run_by_the_next_check(db, queue):
    """The database decides: a pending row with no message anywhere is queued again and then runs."""
    from numaweb.inventory.demo import build_demo

    build_demo("demo")
    session = SchedulingSession.objects.create(cluster=Cluster.objects.get(name="demo"))  # never queued
    session.jobs.set(Job.objects.filter(status=Job.PENDING))
    assert queue() == []
    [pk] = services.SESSIONS.recover(0)
    services.execute_session(pk)  # what the worker does with the message
    session.refresh_from_db()
    assert session.status == "done" and session.pods_placed >= 5


def test_request_errors_reach_the_log_with_their_traceback(client, db, monkeypatch):
    import numaweb.urls

    def boom(request):
        raise RuntimeError("kaboom in the dashboard")

    home = next(p for p in numaweb.urls.urlpatterns if getattr(p, "name", None) == "home")
    monkeypatch.setattr(home, "callback", boom)
    handler = logging.getLogger("django.request").handlers[0]
    stream = io.StringIO()
    old = handler.setStream(stream)
    try:
        client.raise_request_exception = False
        assert client.get("/").status_code == 500
    finally:
        handler.setStream(old)
    text = stream.getvalue()
    assert "Internal Server Error: /" in text and "Traceback" in text and "kaboom in the dashboard" in text


def test_json_log_lines_carry_extras_and_tracebacks():
    from numaweb.logs import JsonFormatter

    record = logging.LogRecord("numaweb.scheduling", logging.INFO, __file__, 1, "session %s done", (7,), None)
    record.session, record.ms = 7, 12.5
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "session 7 done" and entry["level"] == "INFO"
    assert entry["logger"] == "numaweb.scheduling" and entry["session"] == 7 and entry["ms"] == 12.5
    assert entry["time"].endswith("+00:00")
    try:
        raise ValueError("bad")
    except ValueError:
        import sys

        failed = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    entry = json.loads(JsonFormatter().format(failed))
    assert "Traceback" in entry["exc"] and "ValueError: bad" in entry["exc"]


def test_gunicorn_logs_json_lines_when_asked(monkeypatch, tmp_path):
    import logging.config
    import runpy

    import numaweb

    path = str(Path(numaweb.__file__).parent / "gunicorn_conf.py")
    # the file claims a metrics folder and names it in the environment: a scratch one here, and the variable
    # restored afterwards (left set, this process's later /metrics would read files instead of its own counts)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    monkeypatch.setenv("NUMAWEB_LOG_FORMAT", "plain")
    assert "logconfig_dict" not in runpy.run_path(path)  # gunicorn's own plain format
    monkeypatch.setenv("NUMAWEB_LOG_FORMAT", "json")
    logging.config.dictConfig(runpy.run_path(path)["logconfig_dict"])
    logger = logging.getLogger("gunicorn.error")
    try:
        stream = io.StringIO()
        logger.handlers[0].setStream(stream)
        logger.info("Listening at: %s", "http://127.0.0.1:9")
        entry = json.loads(stream.getvalue())
        assert entry["logger"] == "gunicorn.error" and entry["message"] == "Listening at: http://127.0.0.1:9"
    finally:
        for name in ("gunicorn.error", "gunicorn.access"):
            logging.getLogger(name).handlers.clear()
