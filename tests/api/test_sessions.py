"""Sessions through the API: 202 + URL, progress/status, paginated results, dry run, broker down."""

import socket

import pytest

from numaweb.inventory.models import Allocation
from numaweb.jobs.models import Job
from numaweb.scheduling.models import SchedulingSession
from tests.web.helpers import allocated_cpus, make_job, make_node, use_broker


@pytest.fixture
def seed_cluster(cluster):
    """Seed 001: node-1 single-numa-node 16+16, node-2 best-effort 16+16, node-3 best-effort 20+20."""
    make_node(cluster, "node-1", (2, 1, 16, 1), "single-numa-node")
    make_node(cluster, "node-2", (2, 1, 16, 1), "best-effort")
    make_node(cluster, "node-3", (2, 1, 20, 1), "best-effort")
    make_job("numa-test", cpus="2", policy="single-numa-node", memory="2048Mi")
    make_job("vj-test", cpus="20", policy="best-effort", memory="100Mi")
    return cluster


def start(api, cluster, django_capture_on_commit_callbacks, **extra):
    with django_capture_on_commit_callbacks(execute=True):
        return api.post("/api/sessions/", {"cluster": cluster.pk, **extra}, format="json")


def test_session_places_seed_pods(api, seed_cluster, eager, django_capture_on_commit_callbacks):
    r = start(api, seed_cluster, django_capture_on_commit_callbacks, profile="volcano")
    assert r.status_code == 202, r.content
    url = r.headers["Location"]
    assert url.endswith(f"/api/sessions/{r.json()['id']}/")
    session = api.get(url).json()
    assert session["status"] == "done", session["error"]
    assert (session["pods_placed"], session["pods_total"], session["jobs_placed"]) == (2, 2, 2)
    assert session["progress_done"] == session["progress_total"] == 2
    results = api.get(session["results_url"]).json()
    assert results["count"] == 2
    where = {p["job"]: p for p in results["results"]}
    assert where["numa-test"]["node_name"] == "node-1"
    assert where["vj-test"]["node_name"] == "node-3"
    assert where["vj-test"]["admitted"] is True and where["vj-test"]["detail"]["groups"]
    # the 20 CPUs sit on one NUMA node of node-3 and are now allocated there
    node3 = seed_cluster.nodes.get(name="node-3")
    cpus = allocated_cpus(node3)
    assert len(cpus) == len(set(cpus)) == 20
    assert {c < 20 for c in cpus} in ({True}, {False})
    assert set(Job.objects.values_list("status", flat=True)) == {"scheduled"}
    # a finished session is not run twice
    assert api.post(f"{url}rerun/").status_code == 409


def test_an_nrt_session_explains_what_the_plugin_checked(api, seed_cluster, eager, django_capture_on_commit_callbacks):
    """The nrt profile: the 2-CPU pod goes to node-1, the one single-numa-node node (scored; the best-effort nodes
    pass unchecked and score 0); the 20-CPU pod fits no 16-CPU zone of node-1, which is filtered with the plugin's
    reason, and goes to node-2, unchecked, first by name among the equal ones, where the kubelet admits it."""
    r = start(api, seed_cluster, django_capture_on_commit_callbacks, profile="nrt", dry_run=True)
    session = api.get(r.headers["Location"]).json()
    assert session["status"] == "done", session["error"]
    where = {p["job"]: p for p in api.get(session["results_url"]).json()["results"]}
    assert (where["numa-test"]["node_name"], where["vj-test"]["node_name"]) == ("node-1", "node-2")
    assert where["vj-test"]["admitted"] is True
    groups = where["vj-test"]["detail"]["groups"]
    reasons = {g["outcome"]: g["reason"] for g in groups}
    assert reasons["filtered"] == "cannot align container: container c, resource cpu"
    assert sorted(n for g in groups if g["outcome"] == "skipped" for n in g["nodes"]) == ["node-2", "node-3"]


def test_dry_run_allocates_nothing(api, seed_cluster, eager, django_capture_on_commit_callbacks):
    r = start(api, seed_cluster, django_capture_on_commit_callbacks, profile="aligned", dry_run=True)
    session = api.get(r.headers["Location"]).json()
    assert session["status"] == "done" and session["pods_placed"] == 2
    assert not Allocation.objects.exists()
    assert set(Job.objects.values_list("status", flat=True)) == {"pending"}


def test_results_pagination_and_filters(api, seed_cluster, eager, django_capture_on_commit_callbacks):
    make_job("too-big", cpus="64", policy="best-effort")
    r = start(api, seed_cluster, django_capture_on_commit_callbacks)
    results_url = r.json()["results_url"]
    page = api.get(results_url + "?page_size=1").json()
    assert page["count"] == 3 and len(page["results"]) == 1 and page["next"]
    unplaced = api.get(results_url + "?placed=false").json()["results"]
    assert [p["job"] for p in unplaced] == ["too-big"]
    assert "Insufficient cpu" in unplaced[0]["reason"]
    assert api.get(results_url + "?placed=maybe").status_code == 400
    assert api.get("/api/sessions/9999/results/").status_code == 404


def test_start_validation(api, seed_cluster):
    assert api.post("/api/sessions/", {"cluster": seed_cluster.pk, "profile": "greedy"}, format="json"
                    ).status_code == 400
    assert api.post("/api/sessions/", {"cluster": 12345}, format="json").status_code == 400
    assert api.get("/api/sessions/777/").status_code == 404


def test_anonymous_cannot_start(anon, seed_cluster):
    assert anon.post("/api/sessions/", {"cluster": seed_cluster.pk}, format="json").status_code == 401
    assert not SchedulingSession.objects.exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_broker_down_is_503_and_nothing_lost(transactional_db, api, seed_cluster):
    with use_broker(f"redis://127.0.0.1:{_closed_port()}/0"):
        r = api.post("/api/sessions/", {"cluster": seed_cluster.pk}, format="json")
    assert r.status_code == 503
    body = r.json()
    assert "unavailable" in body["detail"]
    session = SchedulingSession.objects.get()
    assert body["session"].endswith(f"/api/sessions/{session.pk}/")
    assert session.status == "failed" and "can be started again" in session.error
    assert session.jobs.count() == 2 and Job.objects.filter(status="pending").count() == 2
    # the broker is back (the embedded queue): the same session can be queued again
    again = api.post(f"/api/sessions/{session.pk}/rerun/")
    assert again.status_code == 202 and again.json()["status"] == "pending"
    assert again.json()["error"] == ""


def test_running_session_whose_heartbeat_stopped_is_failed_and_rerun(api, seed_cluster, settings):
    """A worker on another host (its process cannot be checked from here) that stops sending
    heartbeats: after NUMAWEB_SESSION_STALE_SECONDS the session shows failed and can be re-run."""
    from datetime import timedelta

    from django.utils import timezone

    settings.NUMAWEB_SESSION_STALE_SECONDS = 120
    now = timezone.now()
    session = SchedulingSession.objects.create(cluster=seed_cluster, status="running", runs=1, started_at=now,
                                               heartbeat_at=now - timedelta(seconds=100), worker="elsewhere:4242")
    url = f"/api/sessions/{session.pk}/"
    assert api.get(url).json()["status"] == "running"  # 100 s without a heartbeat: maybe still working
    busy = api.post(f"{url}rerun/")
    assert busy.status_code == 409 and "running on elsewhere:4242 (last heartbeat 100 s ago)" in busy.json()["detail"]

    SchedulingSession.objects.filter(pk=session.pk).update(heartbeat_at=now - timedelta(seconds=121))
    body = api.get(url).json()
    assert body["status"] == "failed" and body["finished_at"]
    assert body["error"].startswith("worker lost: no heartbeat from elsewhere:4242 since ")
    assert "(over 120 s)" in body["error"]
    again = api.post(f"{url}rerun/")
    assert again.status_code == 202 and again.json()["status"] == "pending" and again.json()["error"] == ""


def test_rerun_of_a_running_session_whose_worker_is_lost_marks_it_failed_first(api, seed_cluster):
    from django.utils import timezone

    session = SchedulingSession.objects.create(cluster=seed_cluster, status="running", runs=1,
                                               heartbeat_at=timezone.now() - timezone.timedelta(hours=1))
    r = api.post(f"/api/sessions/{session.pk}/rerun/")
    assert r.status_code == 202 and r.json()["status"] == "pending"


def test_a_session_past_its_soft_time_limit_fails_naming_the_limit(api, seed_cluster, eager, settings,
                                                                    django_capture_on_commit_callbacks):
    """The soft limit is checked between pods whatever the pool (./dev run's solo worker too): the run stops,
    nothing is written, and the error says which limit; with room again the same session runs."""
    settings.NUMAWEB_TASK_SOFT_TIME_LIMIT = 0
    body = start(api, seed_cluster, django_capture_on_commit_callbacks).json()
    session = SchedulingSession.objects.get(pk=body["id"])
    assert session.status == "failed"
    assert session.error == "stopped at the soft time limit of 0 s (NUMAWEB_TASK_SOFT_TIME_LIMIT); nothing was written"
    assert not Allocation.objects.exists()
    settings.NUMAWEB_TASK_SOFT_TIME_LIMIT = 60
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/sessions/{session.pk}/rerun/").status_code == 202
    session.refresh_from_db()
    assert session.status == "done" and Allocation.objects.exists()


def test_celery_soft_time_limit_is_worded_the_same(settings):
    """Celery's prefork pool raises SoftTimeLimitExceeded inside the task: the same message."""
    from celery.exceptions import SoftTimeLimitExceeded

    from numaweb.celery import app
    from numaweb.worker.runs import time_limit_reason

    settings.NUMAWEB_TASK_SOFT_TIME_LIMIT = 30
    assert time_limit_reason(SoftTimeLimitExceeded()) == (
        "stopped at the soft time limit of 30 s (NUMAWEB_TASK_SOFT_TIME_LIMIT); nothing was written")
    assert time_limit_reason(ValueError("x")) == ""
    # every task gets both limits from the settings
    assert (app.conf.task_soft_time_limit, app.conf.task_time_limit) == (3540, 3600)


def test_a_session_whose_worker_was_ended_past_the_hard_limit_names_it(api, seed_cluster, settings):
    """The prefork pool ends a task past the hard limit: the session, whose worker process is gone, fails
    saying so (not "worker lost")."""
    from datetime import timedelta

    from django.utils import timezone

    gone = subprocess_pid_that_exited()
    settings.NUMAWEB_TASK_TIME_LIMIT = 60
    now = timezone.now()
    worker = f"{socket.gethostname()}:{gone}"
    late = SchedulingSession.objects.create(cluster=seed_cluster, status="running", runs=1, worker=worker,
                                            started_at=now - timedelta(seconds=61), heartbeat_at=now)
    early = SchedulingSession.objects.create(cluster=seed_cluster, status="running", runs=1, worker=worker,
                                             started_at=now - timedelta(seconds=5), heartbeat_at=now)
    assert api.get(f"/api/sessions/{late.pk}/").json()["error"] == (
        f"stopped at the hard time limit of 60 s (NUMAWEB_TASK_TIME_LIMIT): {worker} was ended; nothing was written")
    assert api.get(f"/api/sessions/{early.pk}/").json()["error"].startswith("worker lost: ")


def subprocess_pid_that_exited() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_session_whose_hosts_worker_stopped_beating_is_lost_within_the_worker_timeout(api, seed_cluster, settings):
    """A hung worker elsewhere (SIGSTOPped, cut off): its own progress heartbeat may be recent, but its host's worker
    heartbeat is older than NUMAWEB_WORKER_TIMEOUT: failed and re-runnable without waiting the stale time."""
    from datetime import timedelta

    from django.utils import timezone

    from numaweb.worker.models import WorkerHeartbeat

    settings.NUMAWEB_WORKER_TIMEOUT, settings.NUMAWEB_SESSION_STALE_SECONDS = 30, 120
    now = timezone.now()
    beat = WorkerHeartbeat.objects.create(name="celery@box", host="box", pid=7, started_at=now, seen_at=now)
    session = SchedulingSession.objects.create(cluster=seed_cluster, status="running", runs=1, worker="box:8",
                                               started_at=now, heartbeat_at=now - timedelta(seconds=20))
    assert api.get(f"/api/sessions/{session.pk}/").json()["status"] == "running"
    WorkerHeartbeat.objects.filter(pk=beat.pk).update(seen_at=now - timedelta(seconds=31))
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["status"] == "failed"
    assert body["error"].startswith("worker lost: the worker on box sent no heartbeat for 31 s (over "
                                    "NUMAWEB_WORKER_TIMEOUT, 30 s")
    assert api.post(f"/api/sessions/{session.pk}/rerun/").status_code == 202
