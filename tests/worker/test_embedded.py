"""The product's run command on the embedded default: `manage.py serve` in a scratch folder (SQLite
+ kombu's file-system queue + a real worker process, behind gunicorn). A session started through the API
completes and shows placements; stopping the server stops the worker; a killed worker is replaced."""

import http.cookiejar
import json
import os
import re
import signal
import socket
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request

from benchmarks.api_latency import embedded_server, one_run


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie awaiting its parent's reap counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_serve_runs_demo_sessions_on_the_file_system_queue(tmp_path):
    with embedded_server(tmp_path / "data") as (api, facts):
        assert (tmp_path / "data" / "broker").is_dir()
        assert (tmp_path / "data" / "numaweb.sqlite3").exists()
        clusters = api.call("GET", "/api/clusters/")[1]["results"]
        demo = next(c for c in clusters if c["name"] == "demo")
        assert demo["node_count"] >= 8
        status, session = api.call("POST", "/api/sessions/", {"cluster": demo["id"], "profile": "volcano"})
        assert status == 202, session
        deadline = time.monotonic() + 60
        while session["status"] not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(0.05)
            session = api.call("GET", session["url"])[1]
        assert session["status"] == "done", session["error"]
        assert session["pods_placed"] >= 5 and session["jobs_placed"] >= 3
        results = api.call("GET", session["results_url"])[1]["results"]
        by_job = {p["job"]: p for p in results}
        assert by_job["numa-test"]["node_name"] == "node-1"  # seed 001, example 1
        assert by_job["vj-test"]["node_name"] == "node-3"  # seed 001, example 2
        assert one_run(api, demo["id"], 0) < 30
        # /metrics (allowed to this machine by the harness) sums every gunicorn process's latencies and reads the
        # database
        metrics = urllib.request.urlopen(api.base + "/metrics", timeout=10).read().decode()
        assert re.search(r'numaweb_sessions\{status="done"\} [1-9]', metrics)
        assert re.search(r'numaweb_request_seconds_count\{method="GET",status="200",view="api:session-detail"\} [1-9]',
                         metrics)
        worker = facts["worker_pid"]
        assert _alive(worker)
    deadline = time.monotonic() + 20
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)


class Browser:
    """urllib with cookies, signed in as serve's admin through the admin login form (open on every set-up), so the
    crawl sees the pages whether or not they require a login."""

    def __init__(self, base: str, password: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        form = self.get("/admin/login/")[2].decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        data = urllib.parse.urlencode({"csrfmiddlewaretoken": token, "username": "admin", "password": password,
                                       "next": "/admin/"}).encode()
        request = urllib.request.Request(base + "/admin/login/", data=data, headers={"Referer": base + "/admin/login/"})
        with self.opener.open(request, timeout=30) as resp:
            assert resp.url.endswith("/admin/"), f"admin login failed: {resp.url}"

    def get(self, path: str) -> tuple[int, dict, bytes]:
        try:
            with self.opener.open(self.base + path, timeout=30) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()


def test_serve_is_the_production_server_and_supervises_its_worker(tmp_path):
    """gunicorn (no development server), every asset of every page served by WhiteNoise with hashed names and
    long cache headers; a killed worker's sessions fail at once, /healthz reports no live worker (still 200), and a
    new worker is started."""
    data = tmp_path / "data"
    with embedded_server(data) as (api, facts):
        base = api.base
        log = facts["log"]
        text = log.read_text(errors="replace")
        assert "gunicorn" in text and "development server" not in text.lower() and "runserver" not in text
        node = api.call("GET", "/api/nodes/")[1]["results"][0]["id"]
        browser = Browser(base, (data / "admin_password").read_text().strip())
        assets: set[str] = set()
        for page in ("/", "/jobs/", "/sessions/", f"/nodes/{node}/", "/api/docs/", "/admin/"):
            status, _headers, body = browser.get(page)
            assert status == 200, page
            found = set(re.findall(r'(?:src|href)="(/static/[^"]+)"', body.decode()))
            assert found, f"{page} links no static file"
            assets |= found
        for asset in sorted(assets):
            status, headers, _body = browser.get(asset)
            assert status == 200, asset
            assert re.search(r"\.[0-9a-f]{12}\.\w+$", asset), f"{asset}: no content hash in the name"
            assert "immutable" in headers["Cache-Control"] and "max-age=315360000" in headers["Cache-Control"]
        assert any("htmx" in a for a in assets) and any(a.endswith(".css") for a in assets)
        assert browser.get("/healthz")[0] == 200

        # a session the worker is running (as its claim writes it), then the worker is killed
        first = facts["worker_pid"]
        with sqlite3.connect(data / "numaweb.sqlite3") as db:
            now = time.strftime("%Y-%m-%d %H:%M:%S")
            cluster = db.execute("SELECT id FROM inventory_cluster").fetchone()[0]
            running = db.execute(
                "INSERT INTO scheduling_schedulingsession (cluster_id, profile, dry_run, status, progress_done, "
                "progress_total, attempts, runs, created_at, started_at, updated_at, heartbeat_at, worker, pods_total,"
                " pods_placed, pods_admitted, jobs_total, jobs_placed, job_count, nodes_total, error, weight,"
                " explain_names, explain_groups, counts, timings) VALUES (?, 'volcano', 1, 'running', 0, 0, 0, 1,"
                " ?, ?, ?, ?, ?, 0, 0, 0, 0, 0, 0, 0, '', 1, 10, 64, '{}', '{}')",
                (cluster, now, now, now, now, f"{socket.gethostname()}:{first}")).lastrowid
        os.kill(first, signal.SIGKILL)
        seen_none, deadline = False, time.monotonic() + 60
        while time.monotonic() < deadline:
            status, _h, body = browser.get("/healthz")
            assert status == 200, body  # the web stays ready while its worker is replaced
            alive = json.loads(body)["workers"]["alive"]
            seen_none |= alive == 0
            pids = [int(p) for p in re.findall(r"worker pid (\d+)", log.read_text(errors="replace"))]
            if seen_none and alive and len(pids) > 1:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"no worker missed, then a new one:\n{log.read_text(errors='replace')}")
        assert pids[-1] != first and _alive(pids[-1])
        # its session failed and queued again by the supervisor, then run by the new worker
        deadline = time.monotonic() + 60
        while (session := api.call("GET", f"/api/sessions/{running}/")[1])["status"] != "done":
            assert time.monotonic() < deadline, f"{session}\n{log.read_text(errors='replace')}"
            time.sleep(0.2)
        text = log.read_text(errors="replace")
        assert f"worker pid {first} exited with code -9; queued again: sessions {running}" in text
        with sqlite3.connect(data / "numaweb.sqlite3") as db:
            runs, worker = db.execute("SELECT runs, worker FROM scheduling_schedulingsession WHERE id = ?",
                                      (running,)).fetchone()
        assert runs == 2 and not worker.endswith(f":{first}")
