"""The queue ranked on the jobs page (operators start it), the start view's refusals, and the run's page: it polls
while the run waits, then shows the proposal with its moves and its verifying session, and the ranked jobs with the
conflicting plans marked."""

import pytest

from numaweb.room import defrag
from numaweb.room.models import DefragRun
from tests.web.helpers import make_job
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = pytest.mark.django_db


def test_the_jobs_page_offers_it_to_operators(operator_client, viewer_client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    cluster = fragmented_rows(nodes=1)
    gang_job(pods=1)
    page = operator_client.get("/jobs/", {"cluster": cluster.pk}).content.decode()
    assert 'id="defrag-form"' in page and '<label for="id_defrag_profile">' in page
    assert 'id="defrag-form"' not in viewer_client.get("/jobs/", {"cluster": cluster.pk}).content.decode()
    assert viewer_client.post("/make-room/queue/start", {"cluster": cluster.pk}).status_code == 403
    r = operator_client.post("/make-room/queue/start", {"cluster": cluster.pk, "profile": "volcano"})
    row = DefragRun.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/make-room/queue/{row.pk}/" and row.profile == "volcano"
    page = operator_client.get("/jobs/", {"cluster": cluster.pk}).content.decode()
    assert f'href="/make-room/queue/{row.pk}/"' in page  # the earlier runs are linked


def test_start_refuses_bad_input_naming_the_field(operator_client):
    cluster = fragmented_rows(nodes=1)
    r = operator_client.post("/make-room/queue/start", {"cluster": cluster.pk})
    assert r.status_code == 400 and r.content.decode().startswith("cluster:")  # no pending jobs
    gang_job(pods=1)
    r = operator_client.post("/make-room/queue/start", {"cluster": cluster.pk, "profile": "fast"})
    assert r.status_code == 400 and r.content.decode().startswith("profile:")
    assert not DefragRun.objects.exists()


def test_the_run_page_polls_then_shows_the_proposal_and_the_conflicts(viewer_client):
    cluster = fragmented_rows(nodes=2)
    a, b = gang_job("train-a", pods=1), gang_job("train-b", pods=1)
    big = make_job("too-big", cpus="40", policy="single-numa-node")
    row = DefragRun.objects.create(**defrag.parse_request(cluster, {}))
    page = viewer_client.get(f"/make-room/queue/{row.pk}/").content.decode()
    assert 'data-status="pending"' in page and "hx-trigger" in page
    defrag.ADVISOR.execute(row.pk)
    row.refresh_from_db()
    page = viewer_client.get(f"/make-room/queue/{row.pk}/",
                             headers={"HX-Request": "true", "HX-Target": "defrag-body"}).content.decode()
    assert page.startswith('<section id="defrag-body"') and 'data-status="done"' in page and "hx-trigger" not in page
    assert 'data-verdict="proposal" data-jobs="2" data-moves="2"' in page
    assert f'href="/sessions/{row.session_id}/" data-session' in page
    assert f'<tr data-job="{a.pk}" class="conflict" data-conflicts="{b.pk}">' in page
    assert f'<tr data-job="{b.pk}" class="conflict" data-conflicts="{a.pk}">' in page
    big_row = page.split(f'<tr data-job="{big.pk}">')[1].split("</tr>")[0]
    assert "no plan:" in big_row
    assert page.count('<tr data-pod="batch/small-') == 2
