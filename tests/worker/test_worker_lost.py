"""A worker killed in the middle of a session, for real: a Celery worker process (the product's, on the
embedded file-system queue and the test's SQLite file) pauses inside the session's commit transaction,
after writing its placement and allocation rows, and is killed with SIGKILL.

- Whole worker killed (a solo pool: one process, which beats itself): nothing was committed; the next worker to
  start marks the session failed ("worker lost") and queues it again, and it completes.
- Whole worker stopped (SIGSTOP: alive, silent) after computing: another worker sees its heartbeat stop, fails
  the session and queues it again, and runs it; the stopped one, woken, writes nothing.
- Pool child killed (prefork, as `manage.py serve` and docker-compose run it): acks_late + reject_on_worker_lost
  put the message back, a fresh child takes the session over from scratch and it completes, with no double
  booking."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import Placement, SchedulingSession
from numaweb.scheduling.tasks import run_scheduling_session
from tests.web.helpers import allocated_cpus, filesystem_broker, make_job, make_node

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def worker_process(data: Path, pool: str, name: str, pause_at: str = "never",
                   module: str = "tests.worker.pausing_worker", **extra: str) -> Iterator[subprocess.Popen]:
    """A Celery worker process (`module`'s) on `data`/broker and the test's database file. On the way out it is
    idle (the test waited for its session) and is killed with its pool children: a warm shutdown on the
    file-system queue takes seconds, and this queue is thrown away."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(NUMAWEB_DATA_DIR=str(data), DATABASE_PATH=str(connection.settings_dict["NAME"]), PYTHONUNBUFFERED="1",
               NUMAWEB_TEST_PAUSE_AT=pause_at, NUMAWEB_TEST_PAUSE_MARKER=str(data / "paused.json"), **extra)
    args = [sys.executable, "-m", module, f"--pool={pool}", "--concurrency=1",
            "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h"]
    with open(data / f"{name}.log", "wb") as log:
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def wait_for(what: str, check: Callable[[], object], proc: subprocess.Popen, log: Path, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"worker exited ({proc.returncode}) before {what}:\n{log.read_text(errors='replace')}")
        time.sleep(0.05)
    raise AssertionError(f"no {what} after {timeout}s:\n{log.read_text(errors='replace')}")


def wait_ready(proc: subprocess.Popen, log: Path) -> None:
    """Until the worker consumes: a starting worker queues again the sessions already pending (housekeeping), so a
    session started before that could be sent twice and run by the next worker without being marked lost first."""
    wait_for("the worker ready", lambda: " ready." in log.read_text(errors="replace"), proc, log)


def paused(marker: Path) -> Callable[[], dict | None]:
    return lambda: json.loads(marker.read_text()) if marker.exists() else None


def session_in(pk: int, *statuses: str) -> Callable[[], SchedulingSession | None]:
    return lambda: SchedulingSession.objects.filter(pk=pk, status__in=statuses).first()


@pytest.fixture
def cluster(db) -> Cluster:
    cluster = Cluster.objects.create(name="lost")
    make_node(cluster, "n1", (2, 1, 4, 1), "single-numa-node")
    make_node(cluster, "n2", (2, 1, 4, 1), "best-effort")
    make_job("a", cpus="2", replicas=2, policy="single-numa-node")
    make_job("b", cpus="3", policy="best-effort")
    return cluster


def assert_nothing_written(cluster: Cluster, generations: dict[str, int]) -> None:
    assert not Placement.objects.exists()
    assert not Allocation.objects.exists()
    assert dict(Node.objects.filter(cluster=cluster).values_list("name", "generation")) == generations
    assert set(Job.objects.values_list("status", flat=True)) == {"pending"}


def assert_completed_once(session: SchedulingSession, cluster: Cluster) -> None:
    assert session.status == "done", session.error
    assert session.pods_total == 3 and session.pods_placed == 3 and session.error == ""
    assert Placement.objects.filter(session=session).count() == 3
    assert Allocation.objects.filter(session=session).count() == 3  # one run's allocations, not two
    for node in Node.objects.filter(cluster=cluster):
        cpus = allocated_cpus(node)
        assert len(cpus) == len(set(cpus)), f"{node.name}: a CPU held twice: {sorted(cpus)}"
    assert sum(len(allocated_cpus(n)) for n in Node.objects.filter(cluster=cluster)) == 2 + 2 + 3
    assert set(Job.objects.values_list("status", flat=True)) == {"scheduled"}


def test_session_task_is_acked_late_and_rejected_when_its_worker_is_lost():
    assert run_scheduling_session.acks_late is True
    assert run_scheduling_session.reject_on_worker_lost is True


def test_whole_worker_killed_mid_commit_then_marked_lost_and_rerun(cluster, tmp_path):
    generations = dict(Node.objects.filter(cluster=cluster).values_list("name", "generation"))
    marker = tmp_path / "paused.json"
    with filesystem_broker(tmp_path / "broker"):
        with worker_process(tmp_path, "solo", "first", pause_at="written") as first:
            wait_ready(first, tmp_path / "first.log")
            session = services.start_session(cluster, "volcano")
            seen = wait_for("a paused session", paused(marker), first, tmp_path / "first.log")
            row = SchedulingSession.objects.get(pk=session.pk)
            assert (seen["pid"], seen["session"]) == (first.pid, session.pk)
            assert row.status == "running" and row.runs == 1 and row.worker.endswith(f":{first.pid}")
            assert row.heartbeat_at is not None and row.heartbeat_at >= row.started_at
            # inside its open transaction the worker had already written every row of the session
            assert (seen["placements"], seen["allocations"]) == (3, 3)
            os.kill(first.pid, signal.SIGKILL)
            assert first.wait(timeout=10) == -signal.SIGKILL
        assert_nothing_written(cluster, generations)
        row.refresh_from_db()
        assert row.status == "running"  # nobody has noticed yet

        # the next worker to start (e.g. `./dev run` again) marks it failed with the reason, queues it again
        # and runs it: nobody has to ask
        with worker_process(tmp_path, "solo", "second") as second:
            row = wait_for("the re-run to finish", session_in(session.pk, "done"), second, tmp_path / "second.log")
        assert row.runs == 2 and row.worker.endswith(f":{second.pid}")
        assert_completed_once(row, cluster)


def test_stopped_worker_is_taken_over_by_another_and_writes_nothing_when_it_resumes(cluster, tmp_path):
    timeout = {"NUMAWEB_WORKER_TIMEOUT": "4"}
    marker = tmp_path / "paused.json"
    with filesystem_broker(tmp_path / "broker"):
        with worker_process(tmp_path, "solo", "first", pause_at="computed", **timeout) as first:
            wait_ready(first, tmp_path / "first.log")
            session = services.start_session(cluster, "volcano")
            wait_for("a paused session", paused(marker), first, tmp_path / "first.log")
            os.kill(first.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                with worker_process(tmp_path, "solo", "second", **timeout) as second:
                    row = wait_for("the session taken over", session_in(session.pk, "done"), second,
                                   tmp_path / "second.log", timeout=60)
                    took = time.monotonic() - stopped
            finally:
                os.kill(first.pid, signal.SIGCONT)
            assert row.runs == 2 and row.worker.endswith(f":{second.pid}") and took < 60
            assert_completed_once(row, cluster)
            generations = dict(Node.objects.filter(cluster=cluster).values_list("name", "generation"))

            marker.with_suffix(".release").touch()  # the stopped worker wakes and goes on to commit what it computed
            wait_for("the woken worker's run to end", lambda: marker.with_suffix(".resumed").exists()
                     and _idle(first.pid), first, tmp_path / "first.log", timeout=30)
        before = (row.status, row.runs, row.worker, row.finished_at)
        row.refresh_from_db()
        assert (row.status, row.runs, row.worker, row.finished_at) == before
        assert_completed_once(row, cluster)  # nothing written twice
        assert dict(Node.objects.filter(cluster=cluster).values_list("name", "generation")) == generations


def _idle(pid: int) -> bool:
    """The process used no CPU over a second (its task is over)."""
    def ticks() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    before = ticks()
    time.sleep(1.0)
    return ticks() == before


def test_pool_child_killed_mid_commit_is_redelivered_and_rerun_from_scratch(cluster, tmp_path):
    marker = tmp_path / "paused.json"
    log = tmp_path / "pool.log"
    with filesystem_broker(tmp_path / "broker"), worker_process(tmp_path, "prefork", "pool", "written") as pool:
        wait_ready(pool, log)
        session = services.start_session(cluster, "aligned")
        seen = wait_for("a paused session", paused(marker), pool, log)
        child = seen["pid"]
        assert child != pool.pid and (seen["placements"], seen["allocations"]) == (3, 3)
        row = SchedulingSession.objects.get(pk=session.pk)
        assert row.status == "running" and row.runs == 1 and row.worker.endswith(f":{child}")
        os.kill(child, signal.SIGKILL)
        row = wait_for("the re-delivered session to finish", session_in(session.pk, "done", "failed"), pool, log)
        assert row.runs == 2 and not row.worker.endswith(f":{child}")
        assert_completed_once(row, cluster)
