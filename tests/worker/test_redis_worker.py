"""A real Redis server (started here on a free port) and a real Celery worker consuming it (not
eager mode): sessions submitted through the API are run by the worker and finish with placements."""


import pytest
from celery.contrib.testing.worker import start_worker
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.celery import app
from numaweb.inventory.models import Cluster
from numaweb.scheduling.models import SchedulingSession
from tests.web.helpers import allocated_cpus, make_job, make_node, use_broker, wait_done

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(redis_url, transactional_db):
    with use_broker(redis_url), start_worker(app, pool="solo", concurrency=1, perform_ping_check=False,
                                             shutdown_timeout=20):
        yield redis_url


def test_sessions_run_on_a_real_worker_over_redis(worker, make_user):
    user = make_user("bob", "operator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    cluster = Cluster.objects.create(name="redis")
    node1 = make_node(cluster, "node-1", (2, 1, 16, 1), "single-numa-node")
    make_node(cluster, "node-3", (2, 1, 20, 1), "best-effort")
    make_job("numa-test", cpus="2", policy="single-numa-node")
    r = client.post("/api/sessions/", {"cluster": cluster.pk, "profile": "volcano"}, format="json")
    assert r.status_code == 202, r.content
    assert SchedulingSession.objects.get().status in ("pending", "running", "done")
    body = wait_done(client, r.headers["Location"])
    assert body["status"] == "done", body["error"]
    assert body["pods_placed"] == 1 and body["runs"] == 1
    placement = client.get(body["results_url"]).json()["results"][0]
    assert placement["node_name"] == "node-1" and placement["admitted"] is True
    assert len(allocated_cpus(node1)) == 2

    # a second session on the same worker sees the first one's allocations
    make_job("vj-test", cpus="20", policy="best-effort")
    second = client.post("/api/sessions/", {"cluster": cluster.pk, "profile": "aligned"}, format="json")
    body = wait_done(client, second.headers["Location"])
    assert body["status"] == "done" and body["pods_placed"] == 1
    assert client.get(body["results_url"]).json()["results"][0]["node_name"] == "node-3"
