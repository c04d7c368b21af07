"""Issue 37, row 3, for real: one SIGKILL of an idle prefork pool process wedged the worker for good (the dead
process held its queue's lock; the main process went on heartbeating, so nothing noticed and a session stayed
pending for minutes). Now the worker sees that its work does not progress (numaweb.worker.stall): it deletes its
heartbeat (its health check fails), ends itself and is replaced; the session is run by the next worker.

- alone (as compose or Kubernetes run it: they restart what exits): the worker exits with code 70, `check_worker`
  fails, and the next worker to start runs the session;
- under `manage.py serve` (`./dev run`), with the product's default NUMAWEB_WORKER_STALL_SECONDS: the session is
  done within 60 s of the kill."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from numaweb.inventory.models import Cluster
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.models import WorkerHeartbeat
from numaweb.worker.stall import EXIT_WEDGED, children
from tests.servers import free_port
from tests.web.helpers import filesystem_broker, make_job, make_node
from tests.worker.test_hung_worker import ROOT, _call, _until
from tests.worker.test_worker_lost import session_in, wait_for, wait_ready, worker_process

STALL = "6"


@pytest.fixture
def cluster(db) -> Cluster:
    cluster = Cluster.objects.create(name="wedged")
    make_node(cluster, "n1")
    make_job("a", cpus="2")
    return cluster


def idle_pool_process(worker: int) -> int:
    """One of the worker's pool processes, once it has them all (none is running anything yet)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kids = children(worker)
        if kids:
            time.sleep(1.0)  # settled
            return children(worker)[0]
        time.sleep(0.1)
    raise AssertionError(f"worker {worker} has no pool process")


@pytest.mark.django_db(transaction=True)
def test_a_wedged_worker_ends_itself_fails_its_health_check_and_the_next_one_runs_its_session(cluster, tmp_path):
    log = tmp_path / "pool.log"
    env = {"NUMAWEB_WORKER_STALL_SECONDS": STALL, "NUMAWEB_WORKER_TIMEOUT": "30"}
    with filesystem_broker(tmp_path / "broker"):
        with worker_process(tmp_path, "prefork", "pool", **env) as pool:
            wait_ready(pool, log)
            # "ready" is logged before the first beat is written: wait for it (a red CI run raced it)
            wait_for("the first heartbeat", lambda: WorkerHeartbeat.objects.exists(), pool, log)
            call_command("check_worker")  # healthy: it beats
            os.kill(idle_pool_process(pool.pid), signal.SIGKILL)
            killed = time.monotonic()
            session = services.start_session(cluster, "volcano")
            assert pool.wait(timeout=60) == EXIT_WEDGED, log.read_text()
            ended = time.monotonic() - killed
            assert "the pool is wedged" in log.read_text()
            with pytest.raises(CommandError, match="no worker heartbeat from host"):
                call_command("check_worker")
            assert SchedulingSession.objects.get(pk=session.pk).status == "pending"  # never started
        with worker_process(tmp_path, "prefork", "next", **env) as nxt:
            row = wait_for("the session run by the next worker", session_in(session.pk, "done", "failed"), nxt,
                           tmp_path / "next.log", timeout=60)
    assert row.status == "done" and row.runs == 1, row.error
    assert ended < int(STALL) + 10
    print(f"wedged worker ended {ended:.1f} s after the kill")


def test_one_pool_process_killed_under_serve_the_next_session_is_done_within_60_s(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(NUMAWEB_DATA_DIR=str(tmp_path / "data"), WEB_CONCURRENCY="1", NUMAWEB_WORKER_CONCURRENCY="2",
               NUMAWEB_ADMIN_PASSWORD="wedge-admin-pw-1", PYTHONUNBUFFERED="1")
    env.pop("NUMAWEB_WORKER_STALL_SECONDS", None)  # the product's default
    base, log = f"http://127.0.0.1:{free_port()}", tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen([sys.executable, "manage.py", "serve", base.removeprefix("http://")], cwd=ROOT,
                                 env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def workers() -> list[int]:
            return [int(p) for p in re.findall(r"worker pid (\d+) on ", log.read_text(errors="replace"))]

        first = _until("no worker started", lambda: workers()[:1], 300, log)[0]
        token = _until("no token printed", lambda: re.findall(r"API token: (\w+)", log.read_text()), 60, log)[0]
        _until("the worker never ready", lambda: " ready." in log.read_text(errors="replace"), 120, log)
        cluster = _call(base, token, "GET", "/api/clusters/")["results"][0]["id"]
        os.kill(idle_pool_process(first), signal.SIGKILL)
        killed = time.monotonic()
        session = _call(base, token, "POST", "/api/sessions/", {"cluster": cluster, "profile": "volcano",
                                                                "dry_run": True})["id"]
        _until("the session was not run", lambda: _call(base, token, "GET", f"/api/sessions/{session}/")["status"]
               in ("done", "failed"), 60, log)
        took = time.monotonic() - killed
        assert _call(base, token, "GET", f"/api/sessions/{session}/")["status"] == "done"
        assert took < 60 and len(workers()) == 2 and "the pool is wedged" in log.read_text()
        print(f"session done {took:.1f} s after one pool process was killed")
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()


def test_compose_and_kubernetes_replace_a_worker_that_ends_itself():
    """The wedged worker exits (code 70): compose's restart policy starts it again, Kubernetes restarts the
    container of its Deployment, and both probe it with check_worker, which fails once its heartbeat is gone."""
    import yaml

    from tests.deploy import resolved_compose

    worker = resolved_compose()["services"]["worker"]
    assert worker["restart"] == "unless-stopped" and "check_worker" in worker["healthcheck"]["test"]
    deployment = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "base" / "worker.yaml").read_text())
    assert deployment["kind"] == "Deployment"
    pod = deployment["spec"]["template"]["spec"]
    assert pod.get("restartPolicy", "Always") == "Always"
    assert "check_worker" in pod["containers"][0]["livenessProbe"]["exec"]["command"]


def test_the_watch_counts_only_a_task_waiting_with_a_process_free_and_nothing_moving(monkeypatch):
    """The decision alone, on Celery's record of this worker's tasks: waiting behind busy processes is not wedged;
    a task that started or ended resets the count."""
    from celery.worker import state

    from numaweb.worker.stall import Watch

    class Request:
        def __init__(self, id: str) -> None:
            self.id = id

    a, b, c = Request("a"), Request("b"), Request("c")
    active: set[Request] = set()
    reserved: set[Request] = set()
    monkeypatch.setattr(state, "active_requests", active)
    monkeypatch.setattr(state, "reserved_requests", reserved)
    monkeypatch.setattr(state, "all_total_count", [0])
    watch = Watch("w@h", concurrency=2)
    assert watch.stalled(0.0) == 0  # nothing to take
    reserved.add(a)
    # a waits, two processes free, nothing moves: counted from the last look at which nothing waited
    assert watch.stalled(1.0) == 1 and watch.stalled(11.0) == 11
    active.add(a)
    state.all_total_count[0] += 1
    assert watch.stalled(12.0) == 0  # a started
    reserved.update((b, c))
    active.add(b)
    state.all_total_count[0] += 1
    assert watch.stalled(13.0) == 0 and watch.stalled(100.0) == 0  # c waits behind two busy processes: fine
    active.discard(a)
    reserved.discard(a)  # a ended: a process is free for c
    assert watch.stalled(101.0) == 0 and watch.stalled(131.0) == 30
