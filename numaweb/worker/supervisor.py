"""The process supervisor of `manage.py serve` (`./dev run`): it starts the product's Celery worker and keeps one
running, the way an orchestrator keeps a compose or Kubernetes worker running.

- The worker is a prefork pool of one process per CPU core (NUMAWEB_WORKER_CONCURRENCY overrides), so a
  comparison's variants run side by side.
- A worker that exits (killed, crashed, or ending itself because its pool no longer takes work:
  numaweb.worker.stall) is started again after a backoff (1 s, doubling up to 60 s, back to 1 s once one has run
  for a minute), and the runs it was running are failed at once ("worker lost") and queued again for the next
  worker, instead of when that one starts.
- A worker that hangs (stopped, deadlocked: alive but silent) is killed once its heartbeat is older than
  NUMAWEB_WORKER_TIMEOUT (or it sent none a minute past that after starting) and it used no CPU for as long (a
  worker committing a large session may miss beats on SQLite, whose write lock it holds), and so replaced the
  same way."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection

from . import heartbeats, housekeeping

log = logging.getLogger("numaweb.serve")

BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0
STEADY_SECONDS = 60.0  # a worker that ran this long resets the backoff
STOP_TIMEOUT = 20.0
HANG_CHECK_SECONDS = 2.0  # how often the worker's heartbeat is read
STARTUP_SECONDS = 60.0  # a new worker's first heartbeat may take this long on top of the timeout


def worker_command(loglevel: str = "INFO", concurrency: int | None = None) -> list[str]:
    """The worker the product runs: a prefork pool of one process per CPU core (NUMAWEB_WORKER_CONCURRENCY
    overrides), so the variants of a comparison, or several sessions, run side by side. SQLite copes: its
    writes are short IMMEDIATE transactions with a busy timeout (settings)."""
    if concurrency is None:
        concurrency = int(os.environ.get("NUMAWEB_WORKER_CONCURRENCY") or os.cpu_count() or 1)
    return [sys.executable, "-m", "celery", "-A", "numaweb", "worker", "--pool=prefork",
            f"--concurrency={max(1, concurrency)}", f"--loglevel={loglevel}",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"numaweb-{os.getpid()}@%h"]


def _cpu_ticks(pid: int) -> int | None:
    """CPU time (user + system clock ticks) used so far by a process and its children (a prefork pool's), None
    where /proc cannot tell."""
    total, found = 0, False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if stat.parent.name == str(pid) or fields[1] == str(pid):
                total, found = total + int(fields[11]) + int(fields[12]), True
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
    return total if found else None


def stop(proc: subprocess.Popen | None) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT s."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Supervisor:
    """One supervised worker; `write` hears what a person running `./dev run` should read (pids, broker)."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.worker: subprocess.Popen | None = None
        self.worker_cpu: int | None = None
        self.worker_busy_at = time.monotonic()

    def start_worker(self) -> subprocess.Popen:
        worker = subprocess.Popen(worker_command(), env=os.environ.copy())
        self.worker, self.worker_cpu, self.worker_busy_at = worker, None, time.monotonic()
        broker = "Redis" if settings.REDIS_URL else f"file system ({settings.BROKER_DIR})"
        self.write(f"worker pid {worker.pid} on {broker}")
        return worker

    def stop(self) -> None:
        stop(self.worker)

    def supervise(self, web: subprocess.Popen, stopping: Callable[[], bool]) -> int:
        """Until `stopping()` or the web server exits (its exit code): restart the worker when it exits, and kill
        it first when it hangs."""
        started = checked = time.monotonic()
        backoff, restart_at = BACKOFF_FIRST, None
        while not stopping():
            if web.poll() is not None:
                log.error("the web server exited with code %s; stopping", web.returncode)
                return web.returncode or 1
            if self.worker is not None and time.monotonic() - checked >= HANG_CHECK_SECONDS:
                checked = time.monotonic()
                cpu = _cpu_ticks(self.worker.pid)  # None (no /proc): the heartbeat alone decides
                if cpu is not None and cpu != self.worker_cpu:
                    self.worker_cpu, self.worker_busy_at = cpu, checked
                self.kill_if_hung(self.worker, checked - started, checked - self.worker_busy_at)
            if self.worker is not None and self.worker.poll() is not None:
                if time.monotonic() - started >= STEADY_SECONDS:
                    backoff = BACKOFF_FIRST
                self.worker_exited(self.worker, backoff)
                self.worker, restart_at = None, time.monotonic() + backoff
                backoff = min(backoff * 2, BACKOFF_MAX)
            if restart_at is not None and time.monotonic() >= restart_at:
                self.start_worker()
                restart_at, started = None, time.monotonic()
            time.sleep(0.2)
        return 0

    def kill_if_hung(self, worker: subprocess.Popen, running: float, idle: float) -> None:
        """SIGKILL a worker whose heartbeat is older than NUMAWEB_WORKER_TIMEOUT (or missing that long after its
        start) and that used no CPU for `idle` > the timeout: the loop then sees it exit, fails its runs and
        starts another."""
        timeout = settings.NUMAWEB_WORKER_TIMEOUT
        if idle <= timeout:
            return
        try:
            age = heartbeats.heartbeat_age(socket.gethostname(), worker.pid)
        except Exception:  # the database is away: the worker cannot be judged now
            log.exception("could not read the heartbeat of worker pid %s", worker.pid)
            return
        finally:
            connection.close()
        # a worker that has not beaten yet is starting (Celery and Django load for seconds on a busy machine)
        silent = running - STARTUP_SECONDS if age is None else age
        if silent <= timeout or running <= timeout or worker.poll() is not None:
            return
        log.error("worker pid %s sent no heartbeat for %.0f s (NUMAWEB_WORKER_TIMEOUT is %s s): hung; killing it to "
                  "start another", worker.pid, silent, timeout, extra={"worker_pid": worker.pid})
        worker.kill()
        worker.wait()

    def worker_exited(self, worker: subprocess.Popen, backoff: float) -> None:
        """Its heartbeat goes, and what it was running is failed now (its pid is gone: numaweb.worker.runs'
        lost-worker rule) and queued again for the next worker."""
        try:
            heartbeats.forget(host=socket.gethostname(), pid=worker.pid)
            again = housekeeping.recover(settings.NUMAWEB_REQUEUE_SECONDS)
        except Exception:
            log.exception("could not fail the runs of worker pid %s", worker.pid)
            again = {}
        finally:
            connection.close()
        lost = {kind: ids for kind, ids in again.items() if ids}
        log.error("worker pid %s exited with code %s; queued again: %s; starting a new one in %.0f s", worker.pid,
                  worker.returncode, "; ".join(f"{kind} {', '.join(map(str, ids))}" for kind, ids in lost.items())
                  or "nothing", backoff, extra={"worker_pid": worker.pid, "exit_code": worker.returncode, "runs": lost})
