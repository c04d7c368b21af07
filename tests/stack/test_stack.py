"""docker-compose's stack without Docker: the commands of docker-compose.yml, as `docker compose config` resolves
them (tests.deploy: Docker Compose's own reading, no daemon, no .env), run against a
throwaway PostgreSQL and a Redis started with compose's own arguments (append-only file), with .env.example as
the env file (DEBUG off). Only the addresses differ: free ports of 127.0.0.1 and a scratch data folder.

1. web (`migrate && collectstatic && gunicorn`), demo data and an admin, no worker yet. In the browser: a
   styled dashboard with htmx loaded and the no-worker banner; a session started from the jobs page shows its
   progress bar and says it waits for a worker; /healthz is 200 (the web is ready) and "degraded", naming the
   workers.
2. compose's worker (prefork, concurrency 2): /healthz "ok"; the page polls the session to done and shows the
   hint table without a reload. No request of the browser failed.
3. the worker SIGKILLed: /healthz reports no live worker within NUMAWEB_WORKER_TIMEOUT (still 200); a session
   submitted meanwhile waits; a new worker: "ok" again and the session completes.
4. worker stopped, a session queued, Redis restarted: the message survived (AOF); a new worker completes it.
5. Redis restarted under a running worker, then a session whose message was lost (the row, never queued): the
   worker's periodic check queues it and it completes.
6. 200 slow connections trickling headers, then bodies: other requests still answered, p99 < 1 s."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from playwright.sync_api import Page, expect

from benchmarks.api_latency import Api
from benchmarks.slow_clients import probe
from tests.deploy import resolved_compose
from tests.servers import RedisServer, free_port, throwaway_postgres

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = resolved_compose()
WORKER_TIMEOUT = 6  # NUMAWEB_WORKER_TIMEOUT of this stack: heartbeats every 2 s
REQUEUE_SECONDS = 3
ADMIN_PASSWORD = "stack-admin-pw-4711"


def env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of an env file (comments and blank values skipped), as compose's env_file reads them."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            if value.strip():
                values[key.strip()] = value.strip()
    return values


class Stack:
    """The running stack: `base` URL, the environment every process gets, a log folder, Redis, the API."""

    def __init__(self, folder: Path, env: dict[str, str], base: str, redis: RedisServer) -> None:
        self.folder, self.env, self.base, self.redis = folder, env, base, redis
        self.api = Api(base)
        self.workers: list[subprocess.Popen] = []

    def manage(self, *args: str) -> str:
        """A one-off command, as `docker compose exec web python manage.py ...` runs it."""
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def start_worker(self) -> subprocess.Popen:
        """compose's worker service command."""
        log = self.folder / f"worker-{len(self.workers) + 1}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(COMPOSE["services"]["worker"]["command"], cwd=ROOT, env=self.env,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        proc.log = log  # type: ignore[attr-defined]
        self.workers.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.folder.glob("*.log")))

    def health(self) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(self.base + "/healthz", timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def wait_health(self, status: str, timeout: float) -> float:
        """Seconds until /healthz answers 200 with `status` ("ok", or "degraded" while no worker is alive)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            code, body = self.health()
            assert code == 200, body  # no worker outage takes the web out of service
            if body["status"] == status:
                return time.monotonic() - started
            time.sleep(0.2)
        raise AssertionError(f"/healthz not {status} after {timeout} s: {self.health()}\n{self.logs()}")

    def session(self, pk: int) -> dict:
        return self.api.call("GET", f"/api/sessions/{pk}/")[1]

    def wait_done(self, pk: int, timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.session(pk)
            if body["status"] in ("done", "failed"):
                assert body["status"] == "done", body["error"]
                return body
            time.sleep(0.2)
        raise AssertionError(f"session {pk} not done after {timeout} s: {self.session(pk)}\n{self.logs()}")

    def submit(self, cluster: int) -> int:
        status, body = self.api.call("POST", "/api/sessions/", {"cluster": cluster, "profile": "aligned",
                                                                "dry_run": True})
        assert status == 202, body
        return body["id"]


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """SIGTERM to the process (a warm shutdown), or SIGKILL to its whole group (pool children too); then
    whatever is left of its group is killed: a compose command runs under `sh -c`, and the shell does not
    pass SIGTERM on (gunicorn outlived the test)."""
    if proc.poll() is None:
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def compose_stack(folder: Path) -> Iterator[Stack]:
    """PostgreSQL, Redis and the web service up (migrated, static files collected, gunicorn serving); no worker."""
    web_command = COMPOSE["services"]["web"]["command"]
    assert "0.0.0.0:8000" in " ".join(web_command)
    port = free_port()
    with throwaway_postgres() as admin_url, contextlib.ExitStack() as cleanup:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute('CREATE DATABASE "numaweb"')
        redis = RedisServer(folder / "redis", COMPOSE["services"]["redis"]["command"][1:])
        redis.start()
        cleanup.callback(redis.stop)
        env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL",
                                                                   "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
        env.update(env_file(ROOT / ".env.example"))
        env.update({**COMPOSE["services"]["web"]["environment"],
                    "DATABASE_URL": admin_url.rsplit("/", 1)[0] + "/numaweb",
                    "REDIS_URL": redis.url, "NUMAWEB_DATA_DIR": str(folder / "data")})
        env.update(NUMAWEB_WORKER_TIMEOUT=str(WORKER_TIMEOUT), NUMAWEB_REQUEUE_SECONDS=str(REQUEUE_SECONDS),
                   DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD, PYTHONUNBUFFERED="1",
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        with open(folder / "web.log", "wb") as out:
            web = subprocess.Popen([part.replace("0.0.0.0:8000", f"127.0.0.1:{port}") for part in web_command],
                                   cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        cleanup.callback(stop, web)
        stack = Stack(folder, env, f"http://127.0.0.1:{port}", redis)
        cleanup.callback(lambda: [stop(w, signal.SIGKILL) for w in stack.workers])
        deadline = time.monotonic() + 240
        while True:
            try:
                stack.health()
                break
            except OSError:
                assert web.poll() is None, f"the web service exited ({web.returncode}):\n{stack.logs()}"
                assert time.monotonic() < deadline, f"the web service did not come up:\n{stack.logs()}"
                time.sleep(0.3)
        yield stack


def login(page: Page, stack: Stack) -> None:
    """Open the site in the browser, signing in as the admin when it asks (the one place that knows how)."""
    page.goto(stack.base + "/")
    if page.locator("input[name=password]").count():
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", ADMIN_PASSWORD)
        page.locator("[type=submit]").first.click()
        page.wait_for_load_state()


def test_compose_stack_end_to_end(page: Page, tmp_path):
    with compose_stack(tmp_path) as stack:
        stack.manage("demo")
        stack.manage("createsuperuser", "--noinput", "--username", "admin", "--email", "admin@localhost")
        stack.api.token = re.search(r"token (\w+)", stack.manage("drf_create_token", "admin")).group(1)
        cluster = next(c for c in stack.api.call("GET", "/api/clusters/")[1]["results"] if c["name"] == "demo")
        web_log = (tmp_path / "web.log").read_text(errors="replace")
        assert "gunicorn" in web_log.lower() and "development server" not in web_log.lower()

        # 1. no worker yet: the pages say so, and a session waits with its progress bar
        status, body = stack.health()
        assert status == 200 and body["status"] == "degraded", body
        assert body["database"] == "ok" and body["broker"] == "ok", body
        assert body["workers"]["alive"] == 0
        login(page, stack)
        page.goto(stack.base + "/")
        expect(page.locator("li.card[data-node-id]")).to_have_count(cluster["node_count"])
        assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).backgroundColor") == "rgb(29, 36, 51)"
        assert page.evaluate("typeof window.htmx === 'object' && typeof htmx.version === 'string'")
        css = page.evaluate("document.querySelector('link[rel=stylesheet]').href")
        assert re.search(r"/static/css/numaweb\.[0-9a-f]{12}\.css$", css), css
        expect(page.locator("#no-worker")).to_be_visible()
        page.goto(stack.base + "/jobs/")
        page.evaluate("window.__marker = 'kept'")
        page.get_by_label("pick default/vj-test for the session").check()
        page.select_option("#session-form select[name=profile]", "volcano")
        page.click("#session-form button[type=submit]")
        section = page.locator("section.session")
        expect(section).to_have_attribute("data-status", "pending")
        expect(section.locator("progress")).to_be_visible()
        expect(section).to_contain_text("waiting for a worker: none is running")

        # 2. compose's worker: healthy, and the page polls the session to its hint table
        first = stack.start_worker()
        stack.wait_health("ok", timeout=120)
        expect(section).to_have_attribute("data-status", "done", timeout=90000)
        expect(page.locator("#hint-table")).to_be_visible()
        expect(page.locator("[data-chosen]")).to_have_text("node-3")  # seed 001, example 2
        expect(page.locator("tr.hint-row").first).to_be_visible()
        assert page.evaluate("window.__marker") == "kept"
        page.goto(stack.base + "/sessions/")
        expect(page.locator("#no-worker")).to_have_count(0)

        # 3. the worker killed: unhealthy within the timeout; a session waits, then a new worker runs it
        stop(first, signal.SIGKILL)
        elapsed = stack.wait_health("degraded", timeout=WORKER_TIMEOUT + 30)
        assert elapsed <= WORKER_TIMEOUT + 3, f"/healthz took {elapsed:.1f} s to notice (timeout {WORKER_TIMEOUT} s)"
        assert stack.health()[1]["workers"]["status"] == f"no worker seen for {WORKER_TIMEOUT} s"
        waiting = stack.submit(cluster["id"])
        time.sleep(1)
        assert stack.session(waiting)["status"] == "pending"
        second = stack.start_worker()
        stack.wait_health("ok", timeout=120)
        stack.wait_done(waiting)

        # 4. Redis restarted while a session is queued and no worker runs: the message survives
        stop(second)  # warm shutdown: the worker deletes its heartbeat, /healthz says so at once
        assert stack.wait_health("degraded", timeout=5) < 5
        queued = stack.submit(cluster["id"])
        assert stack.redis.client().llen("celery") == 1
        stack.redis.restart()
        assert stack.redis.client().llen("celery") == 1, "the queued session did not survive the restart"
        stack.start_worker()
        stack.wait_done(queued)

        # 5. Redis restarted under a running worker, then a session whose message was lost
        stack.redis.restart()
        lost = int(stack.manage("shell", "-c", (
            "from numaweb.scheduling.models import SchedulingSession; "
            f"print(SchedulingSession.objects.create(cluster_id={cluster['id']}, profile='aligned', dry_run=True).pk)"
        )).split()[-1])
        stack.wait_done(lost, timeout=REQUEUE_SECONDS + 60)
        logs = stack.logs()
        assert f"sessions queued again: {lost}" in logs
        assert re.search(rf"session {lost} done in \d+ ms", logs) and re.search(r"worker \S+ started", logs)
        assert re.search(r"worker \S+ stopped", (tmp_path / "worker-2.log").read_text(errors="replace"))

        # 6. slow clients (headers, then bodies, trickled by 200 connections) do not block anyone else
        for body in (False, True):
            out = probe(stack.base, slow=200, seconds=15, interval=2.0, body=body)
            assert out["failed"] == 0 and out["refused"] == 0 and out["p99"] < 1.0, out
