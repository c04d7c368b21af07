"""The queue ranked by a real Celery worker over a real Redis: the run is queued through the API, the worker
reports progress and writes the ranked jobs and the proposal with its verifying dry-run session."""

import pytest
from celery.contrib.testing.worker import start_worker
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.celery import app
from numaweb.room.models import DefragRun
from tests.web.helpers import use_broker, wait_done
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_the_worker_ranks_the_queue_and_verifies_the_proposal(redis_url, make_user):
    user = make_user("carol", "operator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    cluster = fragmented_rows(nodes=2)
    a, b = gang_job("train-a", pods=1), gang_job("train-b", pods=1)
    with use_broker(redis_url), start_worker(app, pool="threads", concurrency=1, perform_ping_check=False,
                                             shutdown_timeout=30):
        r = client.post(f"/api/clusters/{cluster.pk}/defrag/", {}, format="json")
        assert r.status_code == 202, r.content
        body = wait_done(client, r.headers["Location"], timeout=60)
    assert body["status"] == "done", body
    assert sorted(body["proposal"]["jobs"]) == sorted([a.pk, b.pk]) and len(body["proposal"]["moves"]) == 2
    assert body["proposal"]["after"]["topology_affinity_errors"] == 0
    row = DefragRun.objects.get()
    assert row.worker and row.runs == 1 and row.finished_at and row.session.pods_admitted == 2
    assert row.session.room_check
