"""/metrics in Prometheus' text format: request latency by view, sessions by status, queue depth, workers,
engine seconds and pods placed per session, comparison variants; a bearer token, or this machine only."""

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from numaweb.comparisons import services as comparisons
from numaweb.inventory.demo import build_demo
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.models import WorkerHeartbeat
from scheduler_core.scheduler.compare import Variant

pytestmark = pytest.mark.django_db


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_tell_sessions_queue_workers_engine_time_and_comparisons(client, settings):
    settings.NUMAWEB_METRICS_ALLOWED_IPS = ["127.0.0.1"]
    demo = build_demo("demo")
    done = services.start_session(demo, "volcano", True, list(Job.objects.all()))
    services.execute_session(done.pk)
    services.start_session(demo, "aligned", True, [Job.objects.get(name="vj-test")])  # stays pending
    comparisons.create_comparison(demo, [Variant("volcano"), Variant("unaware")])
    WorkerHeartbeat.objects.create(name="w@h", host="h", pid=1, started_at=timezone.now(),
                                   seen_at=timezone.now() - timezone.timedelta(seconds=4))
    client.get("/")
    response = Client().get("/metrics")  # no login: the allow-list decides
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    got = _samples(response.content.decode())
    done.refresh_from_db()
    assert got["numaweb_sessions", (("status", "done"),)] == 1
    assert got["numaweb_sessions", (("status", "pending"),)] == 1
    assert got["numaweb_queue_depth", (("kind", "session"),)] == 1
    assert got["numaweb_queue_depth", (("kind", "comparison_variant"),)] == 2
    assert got["numaweb_workers_alive", ()] == 1
    assert 4 <= got["numaweb_worker_heartbeat_age_seconds", ()] < 60
    assert got["numaweb_session_engine_seconds_count", (("profile", "volcano"),)] == 1
    assert got["numaweb_session_engine_seconds_sum", (("profile", "volcano"),)] == pytest.approx(done.engine_ms / 1000)
    assert got["numaweb_session_pods_placed_total", (("profile", "volcano"),)] == done.pods_placed > 0
    assert got["numaweb_comparison_variants", (("profile", "unaware"), ("status", "pending"))] == 1
    dashboard = ("numaweb_request_seconds_count", (("method", "GET"), ("status", "200"), ("view", "home")))
    assert got[dashboard] >= 1


def test_metrics_need_the_bearer_token_when_one_is_set(db, settings):
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 403  # no token: this machine only
    settings.NUMAWEB_METRICS_TOKEN = "s3cret-token"
    remote = Client(REMOTE_ADDR="10.1.2.3")
    refused = remote.get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    assert remote.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert Client().get("/metrics").status_code == 401  # with a token, even this machine must send it
    ok = remote.get("/metrics", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200 and "numaweb_sessions" in ok.content.decode()
    assert SchedulingSession.objects.count() == 0


def test_no_request_can_add_label_sets_made_up_methods_and_paths_fold_into_one(db, settings):
    """Issue 37 row 1: 3,000 made-up methods on made-up paths were 3,000 label sets (a 45.9 MB scrape at 14 KB a
    method); now they are method `other`, view `unresolved`, and the scrape stays small."""
    settings.NUMAWEB_METRICS_ALLOWED_IPS = ["127.0.0.1"]
    before = len(Client().get("/metrics").content)  # this process's earlier tests left their own label sets
    anonymous = Client()
    for i in range(3000):
        anonymous.generic(f"M{i:05d}" + "X" * 200, f"/made-up-{i}/")
    anonymous.get("/nowhere/")
    body = Client().get("/metrics").content.decode()
    assert len(body.encode()) - before < 100_000, len(body.encode()) - before
    got = _samples(body)
    assert got["numaweb_request_seconds_count", (("method", "other"), ("status", "404"), ("view", "unresolved"))] \
        >= 3000
    assert got["numaweb_request_seconds_count", (("method", "GET"), ("status", "404"), ("view", "unresolved"))] >= 1
    methods = {dict(labels)["method"] for name, labels in got if name == "numaweb_request_seconds_count"}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "other"}


def test_this_machine_is_not_trusted_by_itself_only_the_token_or_the_allow_list(db, settings):
    """Issue 37 row 12: behind a local reverse proxy every request comes from 127.0.0.1, so that address alone
    opens nothing; an explicit allow-list (addresses or networks) or the token does."""
    assert Client().get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 403
    settings.NUMAWEB_METRICS_ALLOWED_IPS = ["10.0.0.0/8", "192.0.2.7"]
    assert Client(REMOTE_ADDR="10.200.3.4").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="192.0.2.7").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="192.0.2.8").get("/metrics").status_code == 403
    assert Client().get("/metrics").status_code == 403
    # the client address is the one throttles use: a forged X-Forwarded-For is not believed
    forged = Client(REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR="10.0.0.1")
    assert forged.get("/metrics").status_code == 403
    settings.NUMAWEB_TRUSTED_PROXIES = 1
    assert forged.get("/metrics").status_code == 200
    settings.NUMAWEB_METRICS_TOKEN = "s3cret-token"
    assert Client(REMOTE_ADDR="10.1.1.1").get("/metrics").status_code == 200  # listed: no token needed
    assert Client(REMOTE_ADDR="203.0.113.9").get(
        "/metrics", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200


def test_a_bad_allow_list_entry_stops_the_settings_naming_it(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "numaweb.settings", "NUMAWEB_DATA_DIR": str(tmp_path),
           "NUMAWEB_METRICS_ALLOWED_IPS": "10.0.0.0/8,not-an-address"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                          text=True)
    assert done.returncode != 0 and "NUMAWEB_METRICS_ALLOWED_IPS: 'not-an-address'" in done.stderr
