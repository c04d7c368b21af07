"""The Make room button on a job's page (operators only, not once the job is scheduled), the start
view's refusals, and the answer's page before and after a worker answered."""

import pytest

from numaweb.room import services
from numaweb.room.models import RoomPlan
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = pytest.mark.django_db


def test_the_button_is_for_operators(operator_client, viewer_client):
    cluster = fragmented_rows(nodes=1)
    job = gang_job()
    page = operator_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="make-room-form"' in page and f'<option value="{cluster.pk}" selected>' in page
    assert 'id="make-room-form"' not in viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert viewer_client.post("/make-room/start", {"cluster": cluster.pk, "job": job.pk}).status_code == 403


def test_start_refuses_bad_input_naming_the_field(operator_client):
    cluster = fragmented_rows(nodes=1)
    r = operator_client.post("/make-room/start", {"cluster": cluster.pk})
    assert r.status_code == 400 and r.content.decode().startswith("job:")
    r = operator_client.post("/make-room/start", {"cluster": cluster.pk, "cpu": "16", "count": "0"})
    assert r.status_code == 400 and r.content.decode().startswith("count:")
    assert operator_client.post("/make-room/start", {"cluster": 999, "job": 1}).status_code == 404
    assert not RoomPlan.objects.exists()


def test_the_answer_page_polls_then_draws_the_plan(viewer_client):
    cluster = fragmented_rows(nodes=2)
    row = RoomPlan.objects.create(**services.parse_request(cluster, {"job": gang_job(pods=2).pk}))
    page = viewer_client.get(f"/make-room/{row.pk}/").content.decode()
    assert 'data-status="pending"' in page and "hx-trigger" in page
    services.execute(row.pk)
    page = viewer_client.get(f"/make-room/{row.pk}/").content.decode()
    assert 'data-status="done"' in page and "hx-trigger" not in page
    assert 'data-moves="2"' in page and page.count('class="room-node"') >= 2
    assert page.count("room-cell st-target\" data-cpu") == 2 * 16  # (the legend has one more)


def test_the_headroom_box_offers_to_make_room_for_more(operator_client, viewer_client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    cluster = fragmented_rows(nodes=2)
    query = {"hr-cpu": "16", "hr-memory": "1Gi", "hr-policy": "single-numa-node", "hr-profile": "aligned"}
    html = operator_client.get("/", query, headers={"HX-Request": "true", "HX-Target": "node-list"}).content.decode()
    assert 'data-headroom-total="frag">0<' in html  # fits nowhere now
    form = html.split('data-make-room="frag"')[1].split("</form>")[0]
    assert 'name="count" min="1" value="1"' in form and 'name="policy" value="single-numa-node"' in form
    assert 'data-make-room="frag"' not in viewer_client.get("/", query, headers={
        "HX-Request": "true", "HX-Target": "node-list"}).content.decode()
    r = operator_client.post("/make-room/start", {"cluster": cluster.pk, "cpu": "16", "memory": "1Gi", "devices": "",
                                                  "policy": "single-numa-node", "profile": "aligned", "count": "3"})
    row = RoomPlan.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/make-room/{row.pk}/"
    assert row.count == 3 and row.shape == {"cpu": "16", "memory": "1Gi", "devices": {}, "policy": "single-numa-node"}
    services.execute(row.pk)
    row.refresh_from_db()
    assert row.result["found"] and len(row.result["moves"]) == 3


def test_a_comparison_with_a_shape_offers_to_make_room(operator_client):
    from numaweb.comparisons.models import Comparison

    cluster = fragmented_rows(nodes=1)
    shape = {"cpu": "16", "memory": "1Gi", "devices": {}, "policy": "single-numa-node"}
    with_shape = Comparison.objects.create(cluster=cluster, shape=shape)
    without = Comparison.objects.create(cluster=cluster)
    html = operator_client.get(f"/comparisons/{with_shape.pk}/").content.decode()
    form = html.split('data-make-room="frag"')[1].split("</form>")[0]
    assert f'name="cluster" value="{cluster.pk}"' in form and 'name="cpu" value="16"' in form
    assert 'data-make-room' not in operator_client.get(f"/comparisons/{without.pk}/").content.decode()
