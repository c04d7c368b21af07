"""A hung worker is replaced (issue 21), for real: `manage.py serve` (what `./dev run` runs) with a 6-second
NUMAWEB_WORKER_TIMEOUT; its worker is SIGSTOPped (alive, silent). /healthz reports no live worker within the
timeout (still 200: the web stays ready), the
supervisor kills the stopped worker once its heartbeat is older than the timeout and starts another, and a new
session is run by it well within 60 s. The per-worker health check (compose's) fails for the silent worker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 6


def _health(base: str) -> tuple[int, str]:
    """(/healthz's status code, its workers' status)."""
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=10) as resp:
            return resp.status, json.loads(resp.read())["workers"]["status"]
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def _until(what: str, check, timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what} after {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")


def _call(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(base + path, json.dumps(body).encode() if body is not None else None,
                                     {"Authorization": f"Token {token}", "Content-Type": "application/json"},
                                     method=method)
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())


def test_a_stopped_worker_is_killed_and_replaced(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(NUMAWEB_DATA_DIR=str(tmp_path / "data"), NUMAWEB_WORKER_TIMEOUT=str(TIMEOUT), WEB_CONCURRENCY="1",
               NUMAWEB_ADMIN_PASSWORD="hung-admin-pw-1", PYTHONUNBUFFERED="1")
    base, log = f"http://127.0.0.1:{free_port()}", tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen([sys.executable, "manage.py", "serve", base.removeprefix("http://")], cwd=ROOT,
                                 env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    stopped = None
    try:
        def workers() -> list[int]:
            return [int(p) for p in re.findall(r"worker pid (\d+) on ", log.read_text(errors="replace"))]

        first = _until("no worker started", lambda: workers()[:1], 300, log)[0]
        token = _until("no token printed", lambda: re.findall(r"API token: (\w+)", log.read_text()), 60, log)[0]
        _until("/healthz never saw a worker", lambda: _health(base) == (200, "ok"), 120, log)
        check = [sys.executable, "manage.py", "check_worker"]
        assert subprocess.run(check, cwd=ROOT, env=env, capture_output=True, timeout=60).returncode == 0

        os.kill(first, signal.SIGSTOP)
        stopped, paused = first, time.monotonic()
        _until("/healthz never missed the worker", lambda: _health(base)[1].startswith("no worker seen"),
               TIMEOUT + 10, log)
        assert _health(base)[0] == 200  # the web stays ready
        assert time.monotonic() - paused <= TIMEOUT + 6, "/healthz did not notice within the heartbeat timeout"
        silent = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        # silent, or already killed by the supervisor (its heartbeat row then goes with it)
        assert silent.returncode == 1 and ("sent no heartbeat for" in silent.stderr
                                           or "no worker heartbeat from host" in silent.stderr), silent.stderr

        second = _until("the stopped worker was not replaced", lambda: workers()[1:2], TIMEOUT + 30, log)[0]
        assert second != first
        assert "sent no heartbeat for" in log.read_text() and "hung; killing it" in log.read_text()
        _until("the old worker still exists", lambda: not os.path.exists(f"/proc/{first}"), 10, log)
        cluster = _call(base, token, "GET", "/api/clusters/")["results"][0]["id"]
        session = _call(base, token, "POST", "/api/sessions/", {"cluster": cluster, "profile": "volcano",
                                                                "dry_run": True})["id"]
        done = _until("the new worker did not run the session", lambda: _call(
            base, token, "GET", f"/api/sessions/{session}/")["status"] in ("done", "failed"), 60, log)
        assert done and _call(base, token, "GET", f"/api/sessions/{session}/")["status"] == "done"
        assert time.monotonic() - paused < 60 + TIMEOUT
    finally:
        if stopped is not None and os.path.exists(f"/proc/{stopped}"):
            os.kill(stopped, signal.SIGKILL)
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()


def test_the_supervisor_kills_only_a_silent_worker_that_also_uses_no_cpu(monkeypatch, settings):
    """A worker committing a large session on SQLite may miss beats (its housekeeping waits for the write lock the
    commit holds) while using CPU: not hung. Silent and idle: hung. Not yet beating: starting, for a while."""
    from numaweb.worker import heartbeats
    from numaweb.worker.supervisor import Supervisor

    settings.NUMAWEB_WORKER_TIMEOUT = 6
    command = Supervisor(print)

    def verdict(age: float | None, running: float, idle: float) -> bool:
        monkeypatch.setattr(heartbeats, "heartbeat_age", lambda host, pid: age)
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            command.kill_if_hung(proc, running, idle)
            return proc.poll() is not None
        finally:
            proc.kill()
            proc.wait()

    assert verdict(age=30, running=100, idle=30) is True  # silent and idle: killed
    assert verdict(age=30, running=100, idle=3) is False  # silent but working (a long commit)
    assert verdict(age=2, running=100, idle=100) is False  # beating: an idle worker
    assert verdict(age=None, running=30, idle=30) is False  # starting
    assert verdict(age=None, running=70, idle=70) is True  # never beat, a minute past the timeout
