"""5,000 node agents reporting every 60 s, simulated against the web server `manage.py serve` runs.

    python -m benchmarks.agent_reports                          # 5,000 agents, 60 s interval, 60 s measured
    python -m benchmarks.agent_reports --agents 1000 --seconds 30 --changed 0.1

In a scratch data folder (SQLite): migrate, a cluster `bench` with an agent token, and --agents nodes already
known to numaweb (each as its agent's first report left it, written in bulk: registering 5,000 nodes one
report at a time is a one-off, not the steady state measured). Then the server `manage.py serve` starts
(gunicorn + uvicorn worker, WEB_CONCURRENCY processes) is sent the reports the agents would send: agent i at
i × interval / agents into each interval, so --agents / --interval reports a second arrive, over --clients
keep-alive connections. A --changed share of them carries a changed cpu_manager_state (a pod started or
ended: applied, state check run); the rest are unchanged (nothing written but the time). Meanwhile one
client (an admin) reads the pages a person looks at — a node's page, the cluster map coloured by
disagreements, the API's node list, pod search — one after the other, and their latencies are kept.

Printed: reports sent, applied per second (changed and unchanged), their latency (p50, p99), how far the
senders fell behind the schedule, and the pages' p50/p99. Figures in benchmarks/README.md."""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from datetime import timedelta
from pathlib import Path

from benchmarks import web_scale

ROOT = Path(__file__).resolve().parent.parent
POD = "7c3d0000-0000-4000-8000-{:012d}"
PASSWORD = "a bench passphrase"


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_state(pods: int, seed: int) -> str:
    """A static policy checkpoint holding `pods` two-CPU containers from CPU 2 up (CPUs 0-1 shared)."""
    entries = {POD.format(seed * 100 + i): {"app": f"{2 + 2 * i}-{3 + 2 * i}"} for i in range(pods)}
    used = 2 + 2 * pods
    return json.dumps({"policyName": "static", "defaultCpuSet": f"0-1,{used}-63" if used < 64 else "0-1",
                       "entries": entries, "checksum": seed})


def report(name: str, topology: dict, pods: int, seed: int) -> dict:
    return {"kind": "numaweb.node-report/1", "cluster": "bench", "node": name,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "agent": {"version": "1", "host": name},
            "topology": topology, "pci_devices": [], "notes": [],
            "kubelet": {"config": None, "cpu_manager_state": cpu_state(pods, seed), "memory_manager_state": None,
                        "device_checkpoint": None}}


def setup(data: Path, agents: int) -> tuple[str, str, dict]:
    """The scratch database with the cluster, its nodes as their first reports left them, and two tokens."""
    web_scale.setup(data)  # migrated, static files collected
    from django.contrib.auth.models import User
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from numaweb.access.roles import set_role
    from numaweb.inventory.agent import digest_of
    from numaweb.inventory.models import AgentBinding, Allocation, Cluster, Node, NodeReport
    from scheduler_core.model.topology import synthetic

    cluster = Cluster.objects.create(name="bench")
    admin = User.objects.create_user("admin", password=PASSWORD)
    set_role(admin, "admin")
    agent = User.objects.create_user("agent-bench")
    set_role(agent, "agent")
    AgentBinding.objects.create(user=agent, cluster=cluster)
    topology = synthetic(2, 2, 16, 1)  # 64 CPUs, 4 NUMA nodes
    document = topology.to_dict()
    now = timezone.now()
    nodes = [Node(cluster=cluster, name=f"node-{i:05d}", topology=document, num_cpus=64, num_numa_nodes=4,
                  num_sockets=2, fingerprint=topology.fingerprint, source_format="agent", imported_at=now)
             for i in range(agents)]
    Node.objects.bulk_create(nodes, batch_size=500)
    rows = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    allocations, reports = [], []
    for i, (name, node) in enumerate(sorted(rows.items())):
        pods = i % 4
        allocations += [Allocation(cluster=cluster, node=node, pod=POD.format(i * 100 + k), container="app",
                                   cpus=f"{2 + 2 * k}-{3 + 2 * k}", origin=Allocation.OBSERVED, observed_at=now)
                        for k in range(pods)]
        # each node last reported a minute ago, as an agent on its 60 s interval did (a report from just now
        # would make the run's first reports too soon, 429)
        earlier = now - timedelta(seconds=60)
        reports.append(NodeReport(node=node, digest=digest_of(report(name, document, pods, i)), reported_at=earlier,
                                  received_at=earlier, changed_at=earlier, state_check={}))
    Allocation.objects.bulk_create(allocations, batch_size=1000)
    NodeReport.objects.bulk_create(reports, batch_size=1000)
    return (Token.objects.create(user=agent).key, Token.objects.create(user=admin).key,
            {"cluster": cluster.pk, "node": rows["node-00000"].pk, "topology": document})


class Client:
    """One keep-alive connection per thread."""

    def __init__(self, base: str, token: str) -> None:
        self.url = urllib.parse.urlsplit(base)
        self.token = token
        self.local = threading.local()

    cookies = ""

    def login(self, username: str, password: str) -> None:
        """A session for the pages (which take no token): the login form, with its CSRF cookie."""
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=120)
        conn.request("GET", "/login/")
        response = conn.getresponse()
        response.read()
        csrf = response.getheader("Set-Cookie", "").split(";", 1)[0]
        form = urllib.parse.urlencode({"username": username, "password": password,
                                       "csrfmiddlewaretoken": csrf.split("=", 1)[1]})
        conn.request("POST", "/login/", body=form, headers={
            "Cookie": csrf, "Content-Type": "application/x-www-form-urlencoded", "Referer": f"{self.url.geturl()}/"})
        response = conn.getresponse()
        response.read()
        session = next(c.split(";", 1)[0] for c in response.msg.get_all("Set-Cookie") or [] if "sessionid" in c)
        self.cookies = f"{csrf}; {session}"
        conn.close()

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, float]:
        """(status, seconds); status 0 when the server could not be reached. A kept-alive connection the server
        has closed while it sat idle (uvicorn's keep-alive timeout, 5 s) is opened again once, as any HTTP
        client does: at a low report rate that is every connection, and was counted as a failed report."""
        started = time.monotonic()
        headers = {"Authorization": f"Token {self.token}", "Content-Type": "application/json"}
        if self.cookies and not path.startswith("/api/"):
            headers = {"Cookie": self.cookies}
        for attempt in range(2):
            conn = getattr(self.local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=120)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                return response.status, time.monotonic() - started
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if not reused or attempt:
                    break
        return 0, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=5000)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long reports are sent")
    parser.add_argument("--changed", type=float, default=0.05, help="share of reports that changed")
    parser.add_argument("--clients", type=int, default=16, help="concurrent report senders")
    parser.add_argument("--web-concurrency", default="2")
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="numaweb-agents-"))
    try:
        started = time.monotonic()
        agent_token, admin_token, ids = setup(data / "data", args.agents)
        print(f"set-up: {args.agents} nodes known, {time.monotonic() - started:.1f} s", flush=True)
        from numaweb.scheduling.management.commands.serve import web_command

        with socket.socket() as probe:  # a free port of this machine
            probe.bind(("127.0.0.1", 0))
            base = f"http://127.0.0.1:{probe.getsockname()[1]}"
        env = {**os.environ, "WEB_CONCURRENCY": args.web_concurrency}
        with open(data / "web.log", "wb") as log:
            server = subprocess.Popen(web_command(base.removeprefix("http://")), cwd=ROOT, env=env, stdout=log,
                                      stderr=subprocess.STDOUT)
        try:
            return run(args, base, agent_token, admin_token, ids)
        finally:
            server.terminate()
            server.wait(timeout=30)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def run(args: argparse.Namespace, base: str, agent_token: str, admin_token: str, ids: dict) -> int:
    agents, admin = Client(base, agent_token), Client(base, admin_token)
    deadline = time.monotonic() + 120
    while admin.call("GET", "/healthz")[0] == 0:
        assert time.monotonic() < deadline, "the web server did not start"
        time.sleep(0.5)
    admin.login("admin", PASSWORD)
    rng = random.Random(1)
    results: dict[str, list[float]] = {"changed": [], "unchanged": [], "late": []}
    failures: list[int] = []
    stop = threading.Event()
    pages: dict[str, list[float]] = {}
    page_paths = {"node page": f"/nodes/{ids['node']}/", "cluster map": f"/clusters/{ids['cluster']}/map?measure=agent",
                  "API nodes": f"/api/nodes/?cluster={ids['cluster']}", "pod search": "/api/pods/?q=7c3d0000-0000-4000"}

    def read_pages() -> None:
        while not stop.is_set():
            for label, path in page_paths.items():
                status, seconds = admin.call("GET", path)
                if status == 200:
                    pages.setdefault(label, []).append(seconds)
                else:
                    failures.append(status)

    def send(i: int, due: float) -> None:
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        results["late"].append(max(0.0, time.monotonic() - due))
        changed = rng.random() < args.changed
        node = i % args.agents
        pods = node % 4  # what the node held when the run began (set-up)
        body = report(f"node-{node:05d}", ids["topology"], (pods + 1) % 4 if changed else pods, node)
        status, seconds = agents.call("POST", "/api/agent/reports/", json.dumps(body).encode())
        if status != 200:
            failures.append(status)
        else:
            results["changed" if changed else "unchanged"].append(seconds)

    reader = threading.Thread(target=read_pages, daemon=True)
    reader.start()
    rate = args.agents / args.interval
    total = int(rate * args.seconds)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
        for n in range(total):
            pool.submit(send, n, start + n / rate)
    elapsed = time.monotonic() - start
    stop.set()
    reader.join(timeout=120)
    applied = len(results["changed"]) + len(results["unchanged"])
    both = results["changed"] + results["unchanged"]
    print(f"reports: {total} sent in {elapsed:.1f} s for a schedule of {args.seconds:.0f} s "
          f"({rate:.1f}/s wanted), {applied} applied = {applied / elapsed:.1f}/s, {len(failures)} failed "
          f"{sorted(set(failures))}")
    print(f"  changed: {len(results['changed'])}, p50 {pct(results['changed'], .5) * 1000:.0f} ms, "
          f"p99 {pct(results['changed'], .99) * 1000:.0f} ms")
    print(f"  unchanged: {len(results['unchanged'])}, p50 {pct(results['unchanged'], .5) * 1000:.0f} ms, "
          f"p99 {pct(results['unchanged'], .99) * 1000:.0f} ms; all p99 {pct(both, .99) * 1000:.0f} ms")
    print(f"  behind schedule: p50 {pct(results['late'], .5):.2f} s, max {max(results['late'] or [0]):.2f} s")
    for label, values in pages.items():
        print(f"page {label}: {len(values)} reads, p50 {statistics.median(values) * 1000:.0f} ms, "
              f"p99 {pct(values, .99) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
