"""The queue ranked through the API (answered eagerly, by the same run lifecycle a worker runs; tests/worker has the
real worker): on the fragmented cluster two one-pod 16-CPU single-numa-node jobs each need one move and, asked one
at a time, both plans move the same small pod; the proposal places both, and its stored verifying session is
checked here against the inventory and the moves listed. Bad requests are 400s naming the field."""

from __future__ import annotations

import socket

import pytest
from django.utils import timezone

from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs.models import Job
from numaweb.room.models import DefragRun
from numaweb.scheduling.models import Placement, SchedulingSession
from scheduler_core.model.cpuset import CPUSet
from tests.web.helpers import make_job
from tests.web.room_rows import fragmented_rows, gang_job


def ask(client, cluster, body, capture):
    with capture(execute=True):
        return client.post(f"/api/clusters/{cluster.pk}/defrag/", body, format="json")


def test_conflicting_jobs_get_a_proposal_one_stored_session_places_with_the_moves_it_lists(
        operator_api, db, eager, django_capture_on_commit_callbacks):
    cluster = fragmented_rows(nodes=2)
    a, b = gang_job("train-a", pods=1), gang_job("train-b", pods=1)
    big = make_job("too-big", cpus="40", policy="single-numa-node")
    r = ask(operator_api, cluster, {}, django_capture_on_commit_callbacks)
    assert r.status_code == 202, r.content
    assert r.headers["Location"].endswith(f"/api/defrag/{r.json()['id']}/")
    body = operator_api.get(r.headers["Location"]).json()
    assert body["status"] == "done", body
    assert body["profile"] == "aligned" and body["profile_source"].startswith("the default")
    ranked = {j["job"]: j for j in body["jobs"]}
    assert [j["job"] for j in body["jobs"]][-1] == big.pk  # no plan: last
    assert (ranked[a.pk]["moves"], ranked[a.pk]["moved_cpus"], ranked[a.pk]["minimal"]) == (1, 2, True)
    assert ranked[b.pk]["moves"] == 1 and ranked[big.pk]["found"] is False and ranked[big.pk]["moves"] is None
    assert ranked[a.pk]["conflicts"] == [b.pk] and ranked[b.pk]["conflicts"] == [a.pk]  # the same small pod
    assert body["progress"] == {"done": 3, "total": 3}

    proposal = body["proposal"]
    assert sorted(proposal["jobs"]) == sorted([a.pk, b.pk]) and len(proposal["moves"]) == 2
    assert proposal["after"]["pods_placed"] == 2 and proposal["after"]["topology_affinity_errors"] == 0

    # the verifying session, from the database: a make-room check naming both jobs, each job's pod admitted
    session = SchedulingSession.objects.get(pk=proposal["after"]["session"])
    assert session.dry_run and session.room_check and session.status == "done"
    assert set(session.jobs.values_list("pk", flat=True)) == {a.pk, b.pk}
    admitted = list(Placement.objects.filter(session=session, status="admitted"))
    assert sorted(p.job for p in admitted) == ["train-a", "train-b"]
    # each admitted pod lands on CPUs free once the listed pods are off, and not where a listed pod goes back
    moved = {(m["from_node"], f"{m['namespace']}/{m['pod']}") for m in proposal["moves"]}
    for p in admitted:
        cpus = CPUSet.parse(p.cpus)
        staying = CPUSet.parse(",".join(c for pod, c in Allocation.objects.filter(node__name=p.node_name)
                                        .values_list("pod", "cpus") if (p.node_name, pod) not in moved and c))
        freed = CPUSet.parse(",".join(m["from_cpus"] for m in proposal["moves"] if m["from_node"] == p.node_name))
        arriving = CPUSet.parse(",".join(m["to_cpus"] for m in proposal["moves"] if m["to_node"] == p.node_name))
        assert len(cpus) == 16 and not cpus & staying and not cpus & arriving
        assert cpus & freed, f"{p.pod} would fit without the moves on {p.node_name}"
    # nothing written to the inventory; the jobs still pending; the run row holds it all
    assert Allocation.objects.count() == 4 and set(Job.objects.values_list("status", flat=True)) == {"pending"}
    row = DefragRun.objects.get()
    assert row.session_id == session.pk and row.result["proposal"]["jobs"] == proposal["jobs"]


def test_the_profile_defaults_to_the_pending_jobs_last_session(operator_api, db, eager,
                                                                django_capture_on_commit_callbacks):
    cluster = fragmented_rows(nodes=1)
    job = gang_job(pods=1)
    session = SchedulingSession.objects.create(cluster=cluster, profile="volcano", weight=3, dry_run=True,
                                               status=SchedulingSession.DONE)
    session.jobs.add(job)
    body = ask(operator_api, cluster, {}, django_capture_on_commit_callbacks).json()
    assert (body["profile"], body["weight"], body["profile_from"]) == ("volcano", 3, session.pk)
    body = ask(operator_api, cluster, {"profile": "unaware"}, django_capture_on_commit_callbacks).json()
    assert (body["profile"], body["profile_from"]) == ("unaware", None)


def test_protected_namespaces_are_honoured(operator_api, db, eager, django_capture_on_commit_callbacks):
    cluster = fragmented_rows(nodes=2)
    gang_job("train-a", pods=1)
    r = ask(operator_api, cluster, {"protected_namespaces": ["batch"]}, django_capture_on_commit_callbacks)
    body = operator_api.get(r.headers["Location"]).json()
    assert body["status"] == "done" and body["jobs"][0]["found"] is False
    assert body["proposal"]["jobs"] == [] and body["proposal"]["after"] is None


@pytest.mark.parametrize(("body", "field"), [
    ([1, 2], "profile"),
    ({"profile": "fast"}, "profile"),
    ({"profile": ["aligned"]}, "profile"),
    ({"allow_evictions": "yes"}, "allow_evictions"),
    ({"max_priority": "high"}, "max_priority"),
    ({"protected_namespaces": [3]}, "protected_namespaces"),
    ({"max_moves": 0}, "max_moves"),
    ({"job": 1}, "job"),
])
def test_bad_requests_are_400_naming_the_field(operator_api, db, body, field):
    cluster = fragmented_rows(nodes=1)
    gang_job(pods=1)
    r = operator_api.post(f"/api/clusters/{cluster.pk}/defrag/", body, format="json")
    assert r.status_code == 400 and field in r.json(), (body, r.content)
    assert not DefragRun.objects.exists()


def test_a_cluster_without_pending_jobs_is_refused(operator_api, db):
    cluster = fragmented_rows(nodes=1)
    r = operator_api.post(f"/api/clusters/{cluster.pk}/defrag/", {}, format="json")
    assert r.status_code == 400 and "no pending jobs" in r.json()["cluster"][0]
    assert operator_api.post("/api/clusters/99999/defrag/", {}, format="json").status_code == 404


def test_one_run_per_cluster_at_a_time_and_operators_ask(operator_api, viewer_api, db):
    cluster = fragmented_rows(nodes=1)
    gang_job(pods=1)
    assert viewer_api.post(f"/api/clusters/{cluster.pk}/defrag/", {}, format="json").status_code == 403
    first = operator_api.post(f"/api/clusters/{cluster.pk}/defrag/", {}, format="json")  # queued, not run
    assert first.status_code == 202 and first.json()["status"] == "pending"
    again = operator_api.post(f"/api/clusters/{cluster.pk}/defrag/", {}, format="json")
    assert again.status_code == 429 and "already has an advisor run" in again.json()["detail"]
    assert again.headers["Retry-After"]
    assert viewer_api.get(first.headers["Location"]).json()["status"] == "pending"
    assert Cluster.objects.count() == 1 and DefragRun.objects.count() == 1


def test_a_run_whose_worker_died_is_queued_again_by_housekeeping(operator_api, db):
    from numaweb.room.defrag import ADVISOR
    from numaweb.worker import runs

    cluster = fragmented_rows(nodes=1)
    gang_job(pods=1)
    assert ADVISOR in runs.kinds()  # every worker's housekeeping sees the kind
    row = DefragRun.objects.create(cluster=cluster, status=DefragRun.RUNNING, worker=f"{socket.gethostname()}:999999",
                                   started_at=timezone.now(), runs=1)
    assert ADVISOR.recover(older_than=60) == [row.pk]
    row.refresh_from_db()
    assert row.status == DefragRun.PENDING and row.error.startswith("worker lost:")
    assert "queued again automatically" in row.error


def test_the_advisor_and_make_room_honour_a_closed_budget(operator_api, eager, django_capture_on_commit_callbacks):
    cluster = fragmented_rows(nodes=2)
    job = gang_job(pods=1)
    Cluster.objects.filter(pk=cluster.pk).update(disruption_budgets=[
        {"name": "batch/small", "allowed": 0, "pods": [f"batch/small-{i}-{n}" for i in range(2) for n in range(2)]}])
    with django_capture_on_commit_callbacks(execute=True):
        room = operator_api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": job.pk}, format="json")
        queue = operator_api.post(f"/api/clusters/{cluster.pk}/defrag/", {}, format="json")
    room = operator_api.get(room.headers["Location"]).json()
    assert room["found"] is False and room["stats"]["not_movable"] == {"PodDisruptionBudget": 4}
    queue = operator_api.get(queue.headers["Location"]).json()
    assert queue["jobs"][0]["found"] is False and queue["proposal"]["jobs"] == []


def test_the_advisor_takes_every_engine_profile(operator_api, db, eager, django_capture_on_commit_callbacks):
    """The profile choice is the engine's registry: each profile ranks the fragmented cluster's one-pod 16-CPU job
    (one move) and says which profile it used; the schema lists every profile."""
    from scheduler_core.scheduler.profiles import PROFILES

    cluster = fragmented_rows(nodes=2)
    job = gang_job("train-a", pods=1)
    for profile in PROFILES:
        r = ask(operator_api, cluster, {"profile": profile}, django_capture_on_commit_callbacks)
        assert r.status_code == 202, (profile, r.content)
        body = operator_api.get(r.headers["Location"]).json()
        assert body["status"] == "done" and body["profile"] == profile, body
        assert [(j["job"], j["moves"]) for j in body["jobs"]] == [(job.pk, 1)], (profile, body["jobs"])
    schema = operator_api.get("/api/schema/?format=json").json()
    field = schema["components"]["schemas"]["DefragRequestRequest"]["properties"]["profile"]
    ref = field.get("$ref") or field["allOf"][0]["$ref"]
    assert schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["enum"] == list(PROFILES)
