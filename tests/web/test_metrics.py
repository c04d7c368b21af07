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


def test_metrics_tell_sessions_queue_workers_engine_time_and_comparisons(client):
    demo = build_demo("demo")
    done = services.start_session(demo, "volcano", True, list(Job.objects.all()))
    services.execute_session(done.pk)
    services.start_session(demo, "aligned", True, [Job.objects.get(name="vj-test")])  # stays pending
    comparisons.create_comparison(demo, [Variant("volcano"), Variant("unaware")])
    WorkerHeartbeat.objects.create(name="w@h", host="h", pid=1, started_at=timezone.now(),
                                   seen_at=timezone.now() - timezone.timedelta(seconds=4))
    client.get("/")
    response = Client().get("/metrics")  # no login: the address decides
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
    dashboard = ("numaweb_request_seconds_count", (("method", "GET"), ("view", "home")))
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
