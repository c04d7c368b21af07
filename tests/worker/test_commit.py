"""What the worker's task does at commit time, against a real database with real commits:
two sessions racing for the same free CPUs, and a failure in the middle of the commit."""

import pytest

from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import Placement, SchedulingSession
from numaweb.worker import runs
from tests.web.helpers import allocated_cpus, make_job, make_node

pytestmark = pytest.mark.django_db(transaction=True)


def new_session(cluster, *jobs, **extra):
    session = SchedulingSession.objects.create(cluster=cluster, **extra)
    session.jobs.set(jobs)
    return session


@pytest.fixture
def small(db):
    cluster = Cluster.objects.create(name="race")
    node = make_node(cluster, "n1", shape=(1, 1, 4, 1), policy="best-effort")  # 4 CPUs, one NUMA node
    return cluster, node


def test_two_sessions_race_for_the_same_cpus(small, monkeypatch):
    cluster, node = small
    a = new_session(cluster, make_job("a", cpus="2"))
    b = new_session(cluster, make_job("b", cpus="2"))
    raced = []

    def checkpoint(stage, session):
        # A has computed its placement on the 4 free CPUs; before A commits, B runs and commits on them
        if stage == "computed" and session.pk == a.pk and not raced:
            raced.append(services.execute_session(b.pk))

    monkeypatch.setattr(services, "checkpoint", checkpoint)
    services.execute_session(a.pk)
    a.refresh_from_db()
    b.refresh_from_db()
    assert raced and (a.status, b.status) == ("done", "done"), (a.error, b.error)
    assert (b.attempts, a.attempts) == (1, 2)  # the loser retried against fresh state
    cpus = allocated_cpus(node)
    assert sorted(cpus) == [0, 1, 2, 3]  # every CPU once: no CPU given to two pods
    node.refresh_from_db()
    assert node.generation == 3
    assert Placement.objects.filter(node=node).count() == 2


def test_loser_without_room_is_unplaced_not_double_booked(small, monkeypatch):
    cluster, node = small
    a = new_session(cluster, make_job("a", cpus="3"))
    b = new_session(cluster, make_job("b", cpus="3"))

    def checkpoint(stage, session):
        if stage == "computed" and session.pk == a.pk and b.__dict__.setdefault("ran", False) is False:
            b.ran = True
            services.execute_session(b.pk)

    monkeypatch.setattr(services, "checkpoint", checkpoint)
    services.execute_session(a.pk)
    a.refresh_from_db()
    assert a.status == "done" and a.attempts == 2 and a.pods_placed == 0
    assert "Insufficient cpu" in a.placements.get().reason
    assert sorted(allocated_cpus(node)) == [0, 1, 2]
    assert Job.objects.get(name="a").status == "unschedulable"


def test_failure_mid_commit_leaves_nothing_and_can_rerun(small, monkeypatch):
    cluster, node = small
    session = new_session(cluster, make_job("a", cpus="2"), make_job("b", cpus="1"))
    generation = node.generation

    def boom(stage, s):
        if stage == "written":
            raise RuntimeError("disk on fire")

    monkeypatch.setattr(services, "checkpoint", boom)
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "failed" and "disk on fire" in session.error
    assert not Placement.objects.exists() and not Allocation.objects.exists()
    node.refresh_from_db()
    assert node.generation == generation
    assert set(Job.objects.values_list("status", flat=True)) == {"pending"}

    monkeypatch.setattr(services, "checkpoint", lambda stage, s: None)
    services.rerun_session(session)  # queued again (on the scratch queue); run it as the worker would
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "done" and session.runs == 2 and session.error == ""
    assert sorted(allocated_cpus(node)) == [0, 1, 2]
    assert Placement.objects.count() == 2


def test_engine_error_is_the_reason(small):
    cluster, node = small
    session = new_session(cluster, make_job("a", cpus="2"))
    node.topology_manager_options = {"prefer-closest-numa-nodes": "perhaps"}  # bypasses the API's checks
    node.save()
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "failed"
    assert "perhaps" in session.error and "n1" in session.error


def test_a_done_session_is_not_run_twice(small):
    cluster, node = small
    session = new_session(cluster, make_job("a", cpus="2"))
    services.execute_session(session.pk)
    services.execute_session(session.pk)  # e.g. a redelivered message
    assert len(allocated_cpus(node)) == 2


def _stale(session, seconds=600, worker="other-host:99", runs=1):
    from datetime import timedelta

    from django.utils import timezone

    SchedulingSession.objects.filter(pk=session.pk).update(
        status="running", runs=runs, worker=worker, heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_heartbeat_is_written_while_running(small, monkeypatch):
    cluster, _node = small
    session = new_session(cluster, make_job("a", cpus="1"), make_job("b", cpus="1"))
    beats = []

    def checkpoint(stage, s):
        beats.append(SchedulingSession.objects.values_list("status", "heartbeat_at", "worker").get(pk=s.pk))

    monkeypatch.setattr(services, "checkpoint", checkpoint)
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "done" and session.worker == runs.worker_id()
    (status, computed, worker), (_, written, _) = beats
    assert status == "running" and worker == runs.worker_id()
    assert session.started_at <= computed <= written <= session.heartbeat_at <= session.finished_at


def test_redelivered_message_leaves_a_live_run_alone_and_takes_over_a_lost_one(small, settings):
    cluster, node = small
    settings.NUMAWEB_SESSION_STALE_SECONDS = 120
    session = new_session(cluster, make_job("a", cpus="2"))
    _stale(session, seconds=30)  # another host's worker, heartbeat 30 s ago: still working
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert (session.status, session.runs, session.worker) == ("running", 1, "other-host:99")
    assert not Placement.objects.exists()

    _stale(session, seconds=121)  # silent too long: lost; the re-delivered message runs it from scratch
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert (session.status, session.runs, session.worker) == ("done", 2, runs.worker_id())
    assert sorted(allocated_cpus(node)) == [0, 1]


def test_automatic_reruns_stop_at_max_runs(small, settings):
    cluster, _node = small
    settings.NUMAWEB_SESSION_MAX_RUNS = 3
    session = new_session(cluster, make_job("a", cpus="2"))
    _stale(session, runs=3)  # a session whose worker died three times (e.g. it runs out of memory)
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "failed" and session.runs == 3 and session.error.startswith("worker lost: ")
    assert not Allocation.objects.exists()
    services.rerun_session(session)  # a person may still run it again
    assert services.execute_session(session.pk).status == "done"


def test_a_run_declared_lost_meanwhile_writes_nothing(small, monkeypatch):
    cluster, node = small
    session = new_session(cluster, make_job("a", cpus="2"))
    generation = node.generation

    def checkpoint(stage, s):
        if stage == "computed":  # seen from elsewhere, this run went silent for too long
            _stale(s, worker=runs.worker_id(), runs=s.runs)
            assert services.expire_if_lost(SchedulingSession.objects.get(pk=s.pk))

    monkeypatch.setattr(services, "checkpoint", checkpoint)
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "failed" and session.error.startswith("worker lost: no heartbeat from ")
    assert not Placement.objects.exists() and not Allocation.objects.exists()
    node.refresh_from_db()
    assert node.generation == generation
