"""Session lists cost the same queries however many sessions they show, and the API's direct session
representation writes exactly what DRF's generic ModelSerializer path writes."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.reverse import reverse
from rest_framework.test import APIRequestFactory

from numaweb.api.serializers import SessionSerializer
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from tests.web.helpers import make_job


def _sessions(cluster, n: int) -> list[SchedulingSession]:
    jobs = [Job.objects.filter(name=f"job-{i}").first() or make_job(f"job-{i}", cpus="1") for i in range(3)]
    made = []
    for i in range(n):
        session = services.create_session(cluster, ("volcano", "aligned")[i % 2], bool(i % 3), jobs[: i % 4])
        made.append(session)
    return made


def _generic(session: SchedulingSession, request) -> dict:
    """DRF's own path for every model field, and the links reversed one by one."""
    out = serializers.ModelSerializer.to_representation(SessionSerializer(context={"request": request}), session)
    for field, view in (("url", "api:session-detail"), ("results_url", "api:session-results"),
                        ("explanation_url", "api:session-explanation")):
        out[field] = reverse(view, args=[session.pk], request=request)
    return out


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_direct_representation_equals_drf_generic_path(db, cluster, zone, settings):
    settings.ALLOWED_HOSTS = ["numa.example"]
    pending, done, failed = _sessions(cluster, 3)
    now = timezone.now()
    SchedulingSession.objects.filter(pk=done.pk).update(
        status="done", started_at=now - timedelta(seconds=5), heartbeat_at=now, finished_at=now, engine_ms=12.5,
        commit_ms=3.25, pods_total=7, pods_placed=6, counts={"placed": 6}, timings={"total_s": 0.1}, worker="h:1")
    SchedulingSession.objects.filter(pk=failed.pk).update(status="failed", error="worker lost <b>", runs=2)
    request = Request(APIRequestFactory().get("/api/sessions/", HTTP_HOST="numa.example:8443"))
    with timezone.override(zone):
        for session in SchedulingSession.objects.filter(pk__in=[pending.pk, done.pk, failed.pk]):
            direct = SessionSerializer(session, context={"request": request}).data
            assert direct == _generic(session, request)
            assert list(direct) == [f for f in SessionSerializer.Meta.fields if f != "jobs"]  # the documented order
    assert direct["url"] == f"http://numa.example:8443/api/sessions/{session.pk}/"


def test_job_count_is_stored_at_creation(api, cluster):
    sessions = _sessions(cluster, 4)
    for session in sessions:
        body = api.get(f"/api/sessions/{session.pk}/").json()
        assert body["job_count"] == session.jobs.count() == min(session.pk - sessions[0].pk, 3)


def test_lists_cost_the_same_queries_for_one_or_fifty_sessions(api, viewer_client, cluster):
    client = viewer_client
    _sessions(cluster, 1)
    counts = []
    for more in (0, 49):
        _sessions(cluster, more)
        row = []
        for get, url in ((api.get, "/api/sessions/?page_size=10"), (api.get, "/api/sessions/"),
                         (client.get, "/sessions/")):
            with CaptureQueriesContext(connection) as ctx:
                assert get(url).status_code == 200
            row.append(len(ctx.captured_queries))
        counts.append(row)
    assert counts[0] == counts[1], counts
    html = client.get("/sessions/").content.decode()
    assert html.count('<tr data-session="') == 50
    newest = SchedulingSession.objects.order_by("-id").first()
    assert f'<a href="/sessions/{newest.pk}/">#{newest.pk}</a>' in html


def test_sessions_page_when_empty(viewer_client):
    html = viewer_client.get("/sessions/").content.decode()
    assert "No session yet." in html and 'data-session="' not in html


def test_list_rows_equal_each_session_read_alone(api, cluster):
    """The list reads values, not instances: every row is what the session's own URL answers."""
    sessions = _sessions(cluster, 4)
    now = timezone.now()
    SchedulingSession.objects.filter(pk=sessions[1].pk).update(
        status="done", started_at=now - timedelta(seconds=5), heartbeat_at=now, finished_at=now, engine_ms=1.5,
        counts={"placed": 1}, timings={"total_s": 0.1}, worker="h:1")
    rows = api.get("/api/sessions/?page_size=3").json()["results"]
    assert [r["id"] for r in rows] == [s.pk for s in reversed(sessions)][:3]
    for row in rows:
        assert row == api.get(row["url"]).json()
