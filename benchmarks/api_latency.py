"""API latency on the embedded default: submit a job, start a session for it, poll until done.

    python benchmarks/api_latency.py            # starts `manage.py serve` in a scratch folder
    python benchmarks/api_latency.py --runs 10 --url http://127.0.0.1:8000 --token KEY   # a running server

Prints each run and the median (target: < 2 s on the demo cluster). The scratch server is the
product's own run command (SQLite + file-system queue + a real worker process), stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    """Tiny JSON client (stdlib only)."""

    def __init__(self, base: str, token: str | None = None) -> None:
        self.base, self.token = base.rstrip("/"), token

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        url = path if path.startswith("http") else self.base + path
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Token {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")


@contextlib.contextmanager
def embedded_server(data_dir: Path, port: int | None = None, timeout: float = 90.0,
                    settings: Mapping[str, str] | None = None) -> Iterator[tuple[Api, dict]]:
    """Run `manage.py serve` (migrate, demo data, worker, web) on a scratch data folder, with `settings` added to
    its environment; yields an authenticated client and facts read from its output (`worker_pid`). Stopped with
    SIGINT, like Ctrl-C."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    # /metrics answers only its token or an allow-list: this harness scrapes from the machine itself
    env.update(NUMAWEB_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1", NUMAWEB_METRICS_ALLOWED_IPS="127.0.0.1",
               **(settings or {}))
    log_path = data_dir / "serve.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "serve", f"127.0.0.1:{port}"], cwd=ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    facts: dict = {"serve_pid": proc.pid, "log": log_path}
    try:
        api = Api(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + timeout
        while True:
            text = log_path.read_text(errors="replace")
            token = re.search(r"API token: (\w+)", text)
            worker = re.search(r"worker pid (\d+)", text)
            if token and worker:
                try:
                    if api.call("GET", "/healthz")[0] == 200:
                        break
                except OSError:
                    pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not come up:\n{text}")
            time.sleep(0.1)
        api.token = token.group(1)
        facts["worker_pid"] = int(worker.group(1))
        yield api, facts
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def one_run(api: Api, cluster: int, i: int, profile: str = "volcano") -> float:
    """Seconds from job submission to the session's `done`."""
    res = {"cpu": "2", "memory": "1Gi"}
    job = {"cluster": cluster, "name": f"bench-{os.getpid()}-{i}-{time.monotonic_ns()}",
           "tasks": [{"name": "t", "replicas": 1, "topology_policy": "best-effort",
                      "template": {"containers": [{"name": "c", "requests": res, "limits": res}]}}]}
    start = time.perf_counter()
    status, body = api.call("POST", "/api/jobs/", job)
    if status != 201:
        raise RuntimeError(f"job submit: {status} {body}")
    status, session = api.call("POST", "/api/sessions/", {"cluster": cluster, "profile": profile,
                                                         "jobs": [body["id"]]})
    if status != 202:
        raise RuntimeError(f"session start: {status} {session}")
    while session["status"] not in ("done", "failed"):
        time.sleep(0.02)
        session = api.call("GET", session["url"])[1]
    elapsed = time.perf_counter() - start
    if session["status"] != "done":
        raise RuntimeError(f"session failed: {session['error']}")
    return elapsed


def measure(api: Api, runs: int) -> list[float]:
    clusters = api.call("GET", "/api/clusters/")[1]["results"]
    cluster = next(c["id"] for c in clusters if c["name"] == "demo") if clusters else None
    if cluster is None:
        raise RuntimeError("no demo cluster")
    return [one_run(api, cluster, i) for i in range(runs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--url", default=None, help="a running numaweb (default: start one in a scratch folder)")
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    if args.url:
        times = measure(Api(args.url, args.token), args.runs)
    else:
        with tempfile.TemporaryDirectory(prefix="numaweb-bench-") as tmp, embedded_server(Path(tmp)) as (api, _f):
            times = measure(api, args.runs)
    for i, t in enumerate(times, 1):
        print(f"run {i:2d}: {t * 1000:7.1f} ms")
    median = statistics.median(times)
    print(f"median submit → done: {median * 1000:.1f} ms over {len(times)} runs (target < 2000 ms)")
    return 0 if median < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
