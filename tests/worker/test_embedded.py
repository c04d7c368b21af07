"""The product's run command on the embedded default: `manage.py serve` in a scratch folder (SQLite
+ kombu's file-system queue + a real worker process). A session started through the API completes
and shows placements; stopping the server stops the worker."""

import os
import time

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
        worker = facts["worker_pid"]
        assert _alive(worker)
    deadline = time.monotonic() + 20
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)
