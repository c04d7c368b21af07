"""Make room answered by a real Celery worker over a real Redis: the question is queued, the worker
reports progress and writes the verified plan and its dry-run session."""


import pytest
from celery.contrib.testing.worker import start_worker
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.celery import app
from numaweb.room.models import RoomPlan
from tests.web.helpers import use_broker, wait_done
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_the_worker_answers_with_a_verified_plan(redis_url, make_user):
    user = make_user("carol", "operator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    cluster = fragmented_rows()
    job = gang_job()
    with use_broker(redis_url), start_worker(app, pool="threads", concurrency=1, perform_ping_check=False,
                                             shutdown_timeout=30):
        r = client.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": job.pk}, format="json")
        assert r.status_code == 202, r.content
        assert r.json()["status"] in ("pending", "running", "done")  # the worker may already have it
        body = wait_done(client, r.headers["Location"], timeout=60)
    assert body["status"] == "done", body
    assert len(body["moves"]) == 4 and body["minimal"] and body["after"]["topology_affinity_errors"] == 0
    row = RoomPlan.objects.get()
    assert row.worker and row.started_at and row.finished_at and row.session.pods_admitted == 4
