"""One truth for who holds which CPU: concurrent writers, a pod placed once, job status derived from what
its pods hold, finishing and deleting release. SQLite here; the same scenarios on PostgreSQL in
test_postgres.py."""

import pytest

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs import lifecycle
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import Placement, SchedulingSession
from tests.web.helpers import allocated_cpus, make_job, make_node

from . import integrity_scenarios

pytestmark = pytest.mark.django_db(transaction=True)


def check_allocation_race(seen: dict) -> None:
    assert seen["codes"] == [201] + [409] * (integrity_scenarios.WRITERS - 1)
    assert seen["allocations"] == 1
    for body in seen["conflicts"]:  # every loser is told which CPU and who holds it
        assert body["cpus"] == "3" and [h["pod"] for h in body["holders"]] == [seen["winner"]], body
        assert f"held by {seen['winner']}" in body["detail"]


def check_session_race(seen: dict) -> None:
    assert seen["cpus_held_twice"] == [] and seen["pods_held_twice"] == []
    assert sum(seen["sessions"].values()) == integrity_scenarios.WRITERS
    assert seen["sessions"].get("done", 0) >= 1, seen
    for error in seen["errors"]:  # a session may give up after losing every race, never for another reason
        assert "nodes kept changing" in error, seen["errors"]
    assert 0 < seen["cpus_held"] <= 12
    for job in seen["jobs"]:  # gang: a job holds all its pods (scheduled) or none
        if job["held"] == job["replicas"]:
            assert job["status"] == "scheduled", job
        else:
            assert job["held"] == 0 and job["status"] in ("pending", "unschedulable"), job
            assert (job["status"] == "unschedulable") == bool(job["reason"]), job
    assert any(j["status"] == "scheduled" for j in seen["jobs"])
    assert any(j["status"] == "unschedulable" for j in seen["jobs"])  # 24 pods' worth of demand on 12 CPUs


def check_create_race(seen: dict) -> None:
    """One 201, every other create a 400/409 naming the field; never a 500; one row."""
    assert seen["codes"] == [201] + [400] * (integrity_scenarios.WRITERS - 1), seen
    assert seen["rows"] == 1
    for body in seen["refusals"]:
        assert '"name":' in body and "already exists" in body, body


check_job_create_race = check_cluster_create_race = check_create_race


def check_finish_race(seen: dict) -> None:
    """Finished during a running, committing session: 0 allocations afterwards, every run."""
    runs = integrity_scenarios.FINISH_RUNS
    assert seen["held_after"] == [0] * runs, seen
    assert seen["finished"] == runs and sum(seen["statuses"].values()) == runs
    assert set(seen["statuses"]) <= {"done/finished/200"}, seen["statuses"]
    assert sum(seen["outcomes"].values()) == runs


def test_concurrent_same_name_creates_of_jobs():
    check_create_race(integrity_scenarios.job_create_race())


def test_concurrent_same_name_creates_of_clusters():
    check_create_race(integrity_scenarios.cluster_create_race())


def test_finish_while_the_session_runs_and_commits():
    seen = integrity_scenarios.finish_race()
    print(seen)
    check_finish_race(seen)


def test_concurrent_allocations_on_one_cpu():
    check_allocation_race(integrity_scenarios.allocation_race())


def test_concurrent_sessions_over_overlapping_jobs():
    check_session_race(integrity_scenarios.session_race())


def new_session(cluster, *jobs, **extra):
    session = SchedulingSession.objects.create(cluster=cluster, **extra)
    session.jobs.set(jobs)
    return session


@pytest.fixture
def two_nodes(db):
    cluster = Cluster.objects.create(name="c")
    return cluster, [make_node(cluster, f"n{i}", shape=(1, 1, 4, 1)) for i in range(2)]


def test_three_sessions_naming_one_job_give_one_allocation(two_nodes, api):
    cluster, nodes = two_nodes
    job = make_job("once", cpus="2")
    first = new_session(cluster, job)
    services.execute_session(first.pk)
    assert Job.objects.get(pk=job.pk).status == "scheduled"
    for _ in range(2):  # naming it again is refused at submission, naming the job
        r = api.post("/api/sessions/", {"cluster": cluster.pk, "jobs": [job.pk], "dry_run": False},
                            format="json")
        assert r.status_code == 400, r.content
        assert "job default/once is already scheduled" in r.json()["jobs"][0]
    # two more sessions that were submitted before the first ran: they run, and place nothing again
    for _ in range(2):
        late = new_session(cluster, job)
        services.execute_session(late.pk)
        late.refresh_from_db()
        assert late.status == "done" and late.pods_placed == 0
        skipped = late.placements.get()
        assert skipped.status == "skipped" and "already holds CPUs" in skipped.reason
    assert Allocation.objects.filter(pod="default/once-t-0").count() == 1
    assert len(allocated_cpus(nodes[0])) + len(allocated_cpus(nodes[1])) == 2


def test_pod_allocated_between_submission_and_commit_is_skipped(two_nodes, monkeypatch):
    cluster, nodes = two_nodes
    job = make_job("late", cpus="2")
    session = new_session(cluster, job)

    def checkpoint(stage, s):
        if stage == "computed" and not Allocation.objects.exists():
            # the engine chose n0; meanwhile someone records the pod on n1 by hand
            inventory.add_allocation(nodes[1], pod="default/late-t-0", container="c", cpus="0-1")

    monkeypatch.setattr(services, "checkpoint", checkpoint)
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "done", session.error
    placement = session.placements.get()
    assert placement.status == "skipped" and placement.node is None
    assert "already holds CPUs 0-1 on node n1" in placement.reason
    assert [a.node_id for a in Allocation.objects.all()] == [nodes[1].pk]
    assert Job.objects.get(pk=job.pk).status == "scheduled"  # its pod holds CPUs, whoever wrote them
    assert session.counts["skipped"] == 1


@pytest.mark.parametrize("end", ["finish", "delete"])
def test_a_job_ended_after_the_engine_ran_gets_nothing(two_nodes, monkeypatch, end):
    """The commit checks each job with nodes and jobs held: one finished or deleted meanwhile is skipped, and
    its placements say so; the other job of the session is placed as usual."""
    cluster, _nodes = two_nodes
    ended, kept = make_job("ended", cpus="2"), make_job("kept", cpus="2")
    session = new_session(cluster, ended, kept)

    def checkpoint(stage, s):
        if stage == "computed":
            (lifecycle.finish_job if end == "finish" else lifecycle.delete_job)(ended)

    monkeypatch.setattr(services, "checkpoint", checkpoint)
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "done", session.error
    word = "finished" if end == "finish" else "deleted"
    skipped = session.placements.get(job="ended")
    assert skipped.status == "skipped" and skipped.node is None
    assert skipped.message == f"not placed: pod ended-t-0 of job default/ended, which was {word} while the session ran"
    assert list(Allocation.objects.values_list("pod", flat=True)) == ["default/kept-t-0"]
    assert session.jobs_placed == 1 and session.counts["skipped"] == 1
    assert Job.objects.get(pk=kept.pk).status == "scheduled"
    if end == "finish":
        assert Job.objects.get(pk=ended.pk).status == "finished"


def test_a_finish_that_waits_for_the_commit_releases_what_it_wrote(two_nodes, monkeypatch):
    """A finish asked while the commit's transaction is open waits for it (the nodes and the job are held),
    then releases what the commit wrote: the job ends finished and holding nothing."""
    import threading
    import time

    from django.db import connection

    cluster, _nodes = two_nodes
    job = make_job("late", cpus="2", replicas=2)
    session = new_session(cluster, job)
    finished = threading.Event()

    def finish() -> None:
        try:
            lifecycle.finish_job(Job.objects.get(pk=job.pk))
            finished.set()
        finally:
            connection.close()

    finisher = threading.Thread(target=finish)

    def checkpoint(stage, s):
        if stage == "written":  # inside the commit's transaction, its allocations written
            finisher.start()
            time.sleep(0.3)
            assert not finished.is_set(), "the finish did not wait for the commit"

    monkeypatch.setattr(services, "checkpoint", checkpoint)
    services.execute_session(session.pk)
    finisher.join(timeout=30)
    session.refresh_from_db()
    assert session.status == "done" and session.pods_placed == 2, session.error
    assert finished.is_set() and Job.objects.get(pk=job.pk).status == "finished"
    assert not Allocation.objects.exists()


def test_status_is_keyed_on_namespace_and_name(two_nodes):
    cluster, _nodes = two_nodes
    a = job_services.save_job(job_services.engine_job_from_data({
        "name": "same", "namespace": "nsa", "tasks": [{"name": "t", "template": {"containers": [
            {"name": "c", "requests": {"cpu": "2"}, "limits": {"cpu": "2"}}]}}]}), cluster)
    b = job_services.save_job(job_services.engine_job_from_data({
        "name": "same", "namespace": "nsb", "tasks": [{"name": "t", "template": {"containers": [
            {"name": "c", "requests": {"cpu": "64"}, "limits": {"cpu": "64"}}]}}]}), cluster)
    session = new_session(cluster, a, b)
    services.execute_session(session.pk)
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.status, b.status) == ("scheduled", "unschedulable")
    assert a.reason == "" and "Insufficient cpu" in b.reason
    assert sorted(Placement.objects.values_list("namespace", "job")) == [("nsa", "same"), ("nsb", "same")]


def test_partly_scheduled_after_an_allocation_is_dropped(two_nodes):
    cluster, _nodes = two_nodes
    job = make_job("gang", cpus="1", replicas=3)
    services.execute_session(new_session(cluster, job).pk)
    job.refresh_from_db()
    assert job.status == "scheduled" and job.allocations.count() == 3
    inventory.remove_allocation(job.allocations.first())
    job.refresh_from_db()
    assert job.status == "partly_scheduled"
    # a session places only the pod that holds nothing; its held pods count toward the gang
    session = new_session(cluster, job)
    services.execute_session(session.pk)
    session.refresh_from_db()
    job.refresh_from_db()
    assert job.status == "scheduled" and job.allocations.count() == 3
    assert session.pods_placed == 1
    assert Allocation.objects.values("pod").distinct().count() == 3


def test_finish_and_delete_release(two_nodes, api):
    cluster, _nodes = two_nodes
    done, gone = make_job("done", cpus="2"), make_job("gone", cpus="2")
    services.execute_session(new_session(cluster, done, gone).pk)
    assert Allocation.objects.count() == 2
    used = set(Allocation.objects.values_list("node_id", flat=True))
    generations = {n.pk: n.generation for n in cluster.nodes.filter(pk__in=used)}
    r = api.post(f"/api/jobs/{done.pk}/finish/")
    assert r.status_code == 200 and r.json()["status"] == "finished"
    assert not Allocation.objects.filter(job=done).exists()
    assert api.delete(f"/api/jobs/{gone.pk}/").status_code == 204
    assert not Allocation.objects.exists() and not Job.objects.filter(pk=gone.pk).exists()
    assert all(n.generation > generations[n.pk] for n in cluster.nodes.filter(pk__in=used))
    # the cluster is drained: a new job can use the CPUs again; a finished job cannot be scheduled
    r = api.post("/api/sessions/", {"cluster": cluster.pk, "jobs": [done.pk]}, format="json")
    assert r.status_code == 400 and "job default/done is finished" in r.json()["jobs"][0]
    again = make_job("again", cpus="4")
    services.execute_session(new_session(cluster, again).pk)
    assert Job.objects.get(pk=again.pk).status == "scheduled"
