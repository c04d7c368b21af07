"""A comparison of the three profiles on the demo cluster, run by a real Celery worker (two pool
threads) over a real Redis: the variants go out as one group, each finishes on the worker, and the
comparison closes itself when the last one is written."""


import pytest
from celery.contrib.testing.worker import start_worker
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.celery import app
from numaweb.comparisons.models import ComparisonVariant
from numaweb.inventory.demo import build_demo
from numaweb.inventory.models import Allocation
from tests.web.helpers import use_broker, wait_done

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def workers(redis_url, transactional_db):
    with use_broker(redis_url), start_worker(app, pool="threads", concurrency=2, perform_ping_check=False,
                                             shutdown_timeout=30):
        yield redis_url


def test_three_profiles_finish_through_the_workers(workers, make_user):
    user = make_user("carol", "operator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    demo = build_demo("demo")
    r = client.post("/api/comparisons/", {"cluster": demo.pk, "shape": {"cpu": "2", "memory": "2Gi"},
                                          "variants": [{"profile": p} for p in ("volcano", "aligned", "unaware")]},
                    format="json")
    assert r.status_code == 202, r.content
    body = wait_done(client, r.headers["Location"], timeout=60)
    assert body["status"] == "done", body
    metrics = {v["profile"]: v["metrics"] for v in body["variants"]}
    assert metrics["aligned"]["topology_affinity_errors"] == 0
    assert all(m["pods"] == 11 and m["headroom"] > 0 for m in metrics.values())
    assert body["finished_at"] is not None and body["cluster_changed"] is False
    workers_seen = set(ComparisonVariant.objects.values_list("worker", flat=True))
    assert workers_seen and "" not in workers_seen
    assert not Allocation.objects.filter(origin=Allocation.SCHEDULED).exists()
