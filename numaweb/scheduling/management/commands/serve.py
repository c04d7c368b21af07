"""`manage.py serve [ADDR:PORT]`: run the product in one command, the way docker-compose runs it.

Applies migrations, collects the static files (unless they did not change since the last run), loads the demo
data when the database has no cluster, makes sure an admin account and its API token exist, then starts and
watches two children:

- gunicorn with numaweb.gunicorn_conf, the compose web service's server (WhiteNoise serves the static files,
  DEBUG stays off);
- a Celery worker, one pool process per CPU core (on the embedded file-system queue unless REDIS_URL is set),
  so a comparison's variants run in parallel. A worker that exits is started
  again after a backoff (1 s, doubling up to 60 s, back to 1 s once one has run for a minute), and the sessions
  it was running are failed at once ("worker lost", re-runnable) instead of when the next worker starts. A worker
  that hangs (stopped, deadlocked: alive but silent) is killed once its heartbeat is older than
  NUMAWEB_WORKER_TIMEOUT (or it sent none a minute past that after starting) and it used no CPU for as long (a
  worker committing a large session may miss beats on SQLite, whose write lock it holds), and so replaced the
  same way.

The web server exiting, Ctrl-C or SIGTERM stop both."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from numaweb import metrics_store
from numaweb.access.tokens import current_token
from numaweb.inventory.demo import build_demo
from numaweb.inventory.models import Cluster
from numaweb.worker import heartbeats, housekeeping

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


def static_fingerprint() -> str:
    """Every static source file's path, size and modification time, hashed: collectstatic runs only when this
    changed since the last run (its manifest is there too), which saves most of a warm start."""
    from django.contrib.staticfiles import finders

    digest = hashlib.sha256()
    for finder in finders.get_finders():
        for path, storage in finder.list([]):
            stat = os.stat(storage.path(path))
            digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def collect_static() -> bool:
    """collectstatic unless the sources are those of the last run; True when it ran."""
    from django.contrib.staticfiles.storage import staticfiles_storage

    root = Path(settings.STATIC_ROOT)
    stamp = root / ".sources"  # written after a collectstatic: the sources it collected
    manifest = getattr(staticfiles_storage, "manifest_name", None)  # hashed names need their manifest too
    fingerprint = static_fingerprint()
    if stamp.exists() and stamp.read_text() == fingerprint and (manifest is None or (root / manifest).exists()):
        return False
    call_command("collectstatic", interactive=False, verbosity=0)
    stamp.write_text(fingerprint)
    return True


def web_command(bind: str) -> list[str]:
    """gunicorn exactly as the compose web service runs it, on `bind`."""
    return [sys.executable, "-m", "gunicorn", "-c", "python:numaweb.gunicorn_conf", "--bind", bind, "numaweb.asgi"]


def parse_addrport(addrport: str) -> str:
    """runserver's forms: PORT, ADDR:PORT, [IPv6]:PORT."""
    addr, _, port = addrport.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError(f"{addrport!r} is not a port or address:port")
    return f"{addr or '127.0.0.1'}:{port}"


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


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Command(BaseCommand):
    help = "Migrate, collect static files, load demo data if empty, then run gunicorn and a supervised worker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="do not start a worker (one runs elsewhere)")
        parser.add_argument("--no-demo", action="store_true", help="do not load demo data into an empty database")

    def handle(self, *args: Any, addrport: str, no_worker: bool, no_demo: bool, **options: Any) -> None:
        bind = parse_addrport(addrport)
        # metrics of servers that are gone (numaweb.metrics_store): first, so a disk they filled is free to migrate
        metrics_store.sweep(metrics_store.base_folder())
        call_command("migrate", interactive=False, verbosity=0)
        collect_static()
        if not no_demo and not Cluster.objects.exists():
            build_demo("demo", self.stdout)
        self._admin()
        connection.close()
        self.stopping = False

        def stop(*_args: object) -> None:
            self.stopping = True

        # Ctrl-C and SIGTERM (docker stop, systemd, kill) end the loop below, which stops both children
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        web = subprocess.Popen(web_command(bind), env=os.environ.copy())
        self.stdout.write(f"web server (gunicorn) pid {web.pid} at http://{bind}/")
        self.worker: subprocess.Popen | None = None
        try:
            if not no_worker:
                self.worker = self._start_worker()
            code = self._supervise(web)
        finally:
            _stop(web)
            _stop(self.worker)
        if code:
            raise CommandError(f"the web server exited with code {code}", returncode=code)

    def _start_worker(self) -> subprocess.Popen:
        worker = subprocess.Popen(worker_command(), env=os.environ.copy())
        self.worker_cpu: int | None = None
        self.worker_busy_at = time.monotonic()
        broker = "Redis" if settings.REDIS_URL else f"file system ({settings.BROKER_DIR})"
        self.stdout.write(f"worker pid {worker.pid} on {broker}")
        self.stdout.flush()
        return worker

    def _supervise(self, web: subprocess.Popen) -> int:
        """Until asked to stop or the web server exits (its exit code): restart the worker when it exits, and kill
        it first when it hangs."""
        started = checked = time.monotonic()
        backoff, restart_at = BACKOFF_FIRST, None
        while not self.stopping:
            if web.poll() is not None:
                log.error("the web server exited with code %s; stopping", web.returncode)
                return web.returncode or 1
            if self.worker is not None and time.monotonic() - checked >= HANG_CHECK_SECONDS:
                checked = time.monotonic()
                cpu = _cpu_ticks(self.worker.pid)  # None (no /proc): the heartbeat alone decides
                if cpu is not None and cpu != self.worker_cpu:
                    self.worker_cpu, self.worker_busy_at = cpu, checked
                self._kill_if_hung(self.worker, checked - started, checked - self.worker_busy_at)
            if self.worker is not None and self.worker.poll() is not None:
                if time.monotonic() - started >= STEADY_SECONDS:
                    backoff = BACKOFF_FIRST
                self._worker_exited(self.worker, backoff)
                self.worker, restart_at = None, time.monotonic() + backoff
                backoff = min(backoff * 2, BACKOFF_MAX)
            if restart_at is not None and time.monotonic() >= restart_at:
                self.worker, restart_at, started = self._start_worker(), None, time.monotonic()
            time.sleep(0.2)
        return 0

    def _kill_if_hung(self, worker: subprocess.Popen, running: float, idle: float) -> None:
        """SIGKILL a worker whose heartbeat is older than NUMAWEB_WORKER_TIMEOUT (or missing that long after its
        start) and that used no CPU for `idle` > the timeout: the loop then sees it exit, fails its sessions and
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

    def _worker_exited(self, worker: subprocess.Popen, backoff: float) -> None:
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

    def _admin(self) -> None:
        """An `admin` superuser (role admin; password from NUMAWEB_ADMIN_PASSWORD, else generated and kept in
        the data folder), its login and API token printed so the pages and the API can be tried at once."""
        User = get_user_model()
        user = User.objects.filter(username="admin").first()
        secret_file = settings.DATA_DIR / "admin_password"
        if user is None:
            password = os.environ.get("NUMAWEB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            user = User.objects.create_superuser("admin", "admin@localhost", password)
            if not os.environ.get("NUMAWEB_ADMIN_PASSWORD"):
                secret_file.write_text(password)
                secret_file.chmod(0o600)
        token = current_token(user)
        if secret_file.exists():
            login = f"admin / {secret_file.read_text().strip()} (kept in {secret_file})"
        else:
            login = "admin / the password you set (NUMAWEB_ADMIN_PASSWORD, or changed since)"
        self.stdout.write(f"admin login: {login}; API token: {token.key}")
