"""Make room through the API (answered eagerly here; tests/worker runs it on a real worker): on the
fragmented cluster a 16-CPU single-numa-node gang of 4 fits after exactly 4 moves, proven and verified
by a stored dry-run session; the downloads; 400s naming the field; who may ask."""

from __future__ import annotations

import socket

import pytest

from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs.models import Job
from numaweb.room.models import RoomPlan
from numaweb.scheduling.models import Placement, SchedulingSession
from tests.web.helpers import make_job, use_broker
from tests.web.room_rows import fragmented_rows, gang_job


def ask(client, cluster, body, capture):
    with capture(execute=True):
        return client.post(f"/api/clusters/{cluster.pk}/make-room/", body, format="json")


def test_a_gang_that_fits_nowhere_fits_after_exactly_four_moves(operator_api, db, eager,
                                                                 django_capture_on_commit_callbacks):
    cluster = fragmented_rows()
    job = gang_job()
    r = ask(operator_api, cluster, {"job": job.pk}, django_capture_on_commit_callbacks)
    assert r.status_code == 202, r.content
    body = operator_api.get(r.headers["Location"]).json()
    assert body["status"] == "done", body
    assert body["fits_now"] is False and body["found"] is True and body["minimal"] is True
    assert len(body["moves"]) == 4 and body["moved_cpus"] == 8 and body["lower_bound"] == 4
    assert body["evictions"] == []
    freed = {(m["from_node"], tuple(m["from_numa"])) for m in body["moves"]}
    assert len(freed) == 4 and all(m["namespace"] == "batch" and m["to_cpus"] for m in body["moves"])
    assert body["after"]["pods_placed"] == 4 and body["after"]["topology_affinity_errors"] == 0
    # the verifying session is stored, a dry run, with the gang's four pods admitted on the freed NUMA nodes
    session = SchedulingSession.objects.get(pk=body["after"]["session"])
    assert session.dry_run and session.status == "done" and session.pods_admitted == 4
    nodes = set(Placement.objects.filter(session=session, status="admitted").values_list("node__name", flat=True))
    assert nodes == {n for n, _numa in freed}
    # a dry run: nothing written to the inventory, the job still pending
    assert Allocation.objects.count() == 12 and Job.objects.get(pk=job.pk).status == "pending"
    # the downloads
    plan = operator_api.get(body["plan_json"])
    assert plan.status_code == 200 and plan.json()["moves"] == body["moves"]
    script = operator_api.get(body["plan_script"])
    text = script.content.decode()
    assert script.status_code == 200 and text.startswith("#!/bin/sh")
    assert text.count("step kubectl delete pod -n batch") == 4 and text.count("step put batch") == 4
    for m in body["moves"]:
        assert f"step put batch {m['pod']} {m['to_node']}" in text


def test_a_shape_times_count(api, db, eager, django_capture_on_commit_callbacks):
    cluster = fragmented_rows()
    body = {"shape": {"cpu": "16", "memory": "1Gi"}, "count": 2, "policy": "single-numa-node"}
    r = ask(api, cluster, body, django_capture_on_commit_callbacks)
    answer = api.get(r.headers["Location"]).json()
    assert answer["found"] and len(answer["moves"]) == 2 and answer["minimal"]
    # fits now: a smaller shape needs no move
    r = ask(api, cluster, {**body, "shape": {"cpu": "8", "memory": "1Gi"}}, django_capture_on_commit_callbacks)
    answer = api.get(r.headers["Location"]).json()
    assert answer["fits_now"] is True and answer["moves"] == []
    assert api.get(answer["plan_json"]).status_code == 200


def test_every_engine_profile_is_accepted(api, db, eager, django_capture_on_commit_callbacks):
    """The profile choice is the engine's registry: each profile answers the same question (a 16-CPU pod fits after
    one move), the answer names the profile it used, and the schema lists every profile."""
    from scheduler_core.scheduler.profiles import PROFILES

    cluster = fragmented_rows()
    body = {"shape": {"cpu": "16", "memory": "1Gi"}, "count": 1, "policy": "single-numa-node"}
    for profile in PROFILES:
        r = ask(api, cluster, {**body, "profile": profile}, django_capture_on_commit_callbacks)
        assert r.status_code == 202, (profile, r.content)
        answer = api.get(r.headers["Location"]).json()
        assert (answer["profile"], answer["found"], len(answer["moves"])) == (profile, True, 1), answer
    schema = api.get("/api/schema/?format=json").json()
    field = schema["components"]["schemas"]["MakeRoomRequestRequest"]["properties"]["profile"]
    ref = field.get("$ref") or field["allOf"][0]["$ref"]
    assert schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["enum"] == list(PROFILES)


def test_what_may_not_move_is_respected(api, db, eager, django_capture_on_commit_callbacks):
    cluster = fragmented_rows(nodes=3)
    job = gang_job(pods=1)
    r = ask(api, cluster, {"job": job.pk, "protected_namespaces": ["batch"]}, django_capture_on_commit_callbacks)
    answer = api.get(r.headers["Location"]).json()
    assert answer["status"] == "done" and answer["found"] is False and answer["reason"]
    assert answer["stats"]["not_movable"] == {"namespace": 6}
    assert api.get(answer["plan_json"]).status_code == 409
    r = ask(api, cluster, {"job": job.pk, "pinned": ["batch/small-0-*", "batch/small-1-*", "batch/small-2-0"]},
            django_capture_on_commit_callbacks)
    answer = api.get(r.headers["Location"]).json()
    assert [m["pod"] for m in answer["moves"]] == ["small-2-1"]


@pytest.mark.parametrize(("body", "field"), [
    ({}, "job"),
    ({"job": 1, "shape": {"cpu": "2"}, "count": 1}, "job"),
    ({"job": 99999}, "job"),
    ({"shape": {"cpu": "16"}}, "count"),
    ({"shape": {"cpu": "16"}, "count": 0}, "count"),
    ({"shape": {"cpu": "16"}, "count": 100000}, "count"),
    ({"shape": {"cpu": "lots"}, "count": 1}, "shape"),
    ({"shape": {"cpu": "16"}, "count": 1, "policy": "tidy"}, "shape"),
    ({"shape": {"cpu": "16"}, "count": 1, "profile": "fast"}, "profile"),
    ({"shape": {"cpu": "16"}, "count": 1, "allow_evictions": "yes"}, "allow_evictions"),
    ({"shape": {"cpu": "16"}, "count": 1, "max_priority": "high"}, "max_priority"),
    ({"shape": {"cpu": "16"}, "count": 1, "protected_namespaces": [3]}, "protected_namespaces"),
    ({"shape": {"cpu": "16"}, "count": 1, "max_moves": 0}, "max_moves"),
    ({"shape": {"cpu": "16"}, "count": 1, "colour": "red"}, "colour"),
])
def test_bad_questions_are_400_naming_the_field(api, db, body, field):
    cluster = fragmented_rows(nodes=1)
    r = api.post(f"/api/clusters/{cluster.pk}/make-room/", body, format="json")
    assert r.status_code == 400 and field in r.json(), (body, r.content)
    assert not RoomPlan.objects.exists()


def test_a_job_of_another_cluster_is_400_naming_it(api, db):
    cluster = fragmented_rows(nodes=1)
    other = Cluster.objects.create(name="other")
    job = make_job("elsewhere", cpus="16", cluster=other)
    r = api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": job.pk}, format="json")
    assert r.status_code == 400, r.content
    assert "belongs to cluster other" in r.json()["job"][0]
    assert not RoomPlan.objects.exists()


def test_bounds_from_settings(api, db, settings):
    cluster = fragmented_rows(nodes=2)
    settings.NUMAWEB_MAKE_ROOM_MAX_NODES = 1
    r = api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": gang_job().pk}, format="json")
    assert r.status_code == 400 and "NUMAWEB_MAKE_ROOM_MAX_NODES" in r.json()["cluster"][0]
    settings.NUMAWEB_MAKE_ROOM_MAX_NODES = 10
    settings.NUMAWEB_MAKE_ROOM_MAX_PODS = 3
    r = api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": gang_job("big").pk}, format="json")
    assert r.status_code == 400 and "NUMAWEB_MAKE_ROOM_MAX_PODS" in r.json()["job"][0]


def test_operators_ask_viewers_read(viewer_api, operator_api, anon_client, db, eager,
                                    django_capture_on_commit_callbacks):
    cluster = fragmented_rows(nodes=2)
    job = gang_job(pods=1)
    assert viewer_api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": job.pk}, format="json").status_code == 403
    assert anon_client.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": job.pk}).status_code == 401
    assert operator_api.post("/api/clusters/9999/make-room/", {"job": job.pk}, format="json").status_code == 404
    r = ask(operator_api, cluster, {"job": job.pk}, django_capture_on_commit_callbacks)
    assert viewer_api.get(r.headers["Location"]).json()["found"] is True
    assert viewer_api.get("/api/make-room/9999/").status_code == 404


def test_an_unreachable_broker_is_503_and_the_question_failed(transactional_db, api):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    cluster = fragmented_rows(nodes=1)
    with use_broker(f"redis://127.0.0.1:{closed}/0"):
        r = api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": gang_job(pods=1).pk}, format="json")
    assert r.status_code == 503 and "unavailable" in r.json()["detail"]
    assert RoomPlan.objects.get().status == "failed"


def test_the_question_is_json_only(api, db):
    """A form has no faithful encoding of its lists and options (a lone pin and a list of one look alike): 415."""
    cluster = fragmented_rows()
    r = api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": make_job("wide", cpus="16", cluster=cluster).pk,
                                                             "allow_evictions": "false"})
    assert r.status_code == 415, r.content
