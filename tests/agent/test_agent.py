"""The node agent (scheduler_core.agent) without a server of numaweb: what a report holds, how it is sent, and
that an unreachable or refusing server never stops it."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from scheduler_core.agent import REPORT_KIND, Options, collect, run
from scheduler_core.agent.__main__ import parse


def sysfs(tmp_path: Path) -> Path:
    """A small live-style sysfs: 4 CPUs on 2 NUMA nodes."""
    root = tmp_path / "sys"
    if root.exists():
        return root
    (root / "devices/system/cpu").mkdir(parents=True)
    (root / "devices/system/cpu/online").write_text("0-3\n")
    for cpu in range(4):
        topo = root / f"devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{cpu}\n")
    for node in range(2):
        folder = root / f"devices/system/node/node{node}"
        folder.mkdir(parents=True)
        (folder / "cpulist").write_text(f"{2 * node}-{2 * node + 1}\n")
        (folder / "meminfo").write_text(f"Node {node} MemTotal:       1048576 kB\n")
    return root


def options(tmp_path: Path, server: str = "http://127.0.0.1:9", **kw) -> Options:
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir(exist_ok=True)
    return Options(server=server, token="secret", cluster="prod", node_name="n1", sysfs=sysfs(tmp_path),
                   proc=tmp_path / "proc", kubelet_root=kubelet, kubelet_config=kubelet / "config.yaml", **kw)


def test_a_report_holds_the_machine_and_the_kubelet_files_as_they_are(tmp_path):
    opts = options(tmp_path)
    (opts.kubelet_root / "cpu_manager_state").write_text('{"policyName": "none", "defaultCpuSet": "0-3"}')
    report = collect(opts)
    assert report["kind"] == REPORT_KIND and (report["cluster"], report["node"]) == ("prod", "n1")
    assert [c["numa"] for c in report["topology"]["cpus"]] == [0, 0, 1, 1]
    assert [n["memory"] for n in report["topology"]["numa_nodes"]] == [1 << 30, 1 << 30]
    assert report["kubelet"] == {"cpu_manager_state": '{"policyName": "none", "defaultCpuSet": "0-3"}',
                                 "memory_manager_state": None, "device_checkpoint": None, "config": None}
    assert report["time"].endswith("Z")


class _Server(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[list[int]] = []
    bodies: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append({"auth": self.headers["Authorization"], "path": self.path, "node": body["node"]})
        code = type(self).answers.pop(0)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"changed": True} if code < 300 else {"detail": "no"}).encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Server.answers, _Server.bodies = [], []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_busy_server_is_retried_with_backoff_until_it_answers(tmp_path, server):
    _Server.answers = [503, 429, 200]
    slept: list[float] = []
    lines: list[str] = []
    assert run(options(tmp_path, server, once=True), sleep=slept.append, log=lines.append) == 0
    assert slept == [1.0, 2.0] and len(_Server.bodies) == 3
    assert _Server.bodies[0] == {"auth": "Token secret", "path": "/api/agent/reports/", "node": "n1"}
    assert "HTTP 503" in lines[0] and "changed" in lines[-1]


def test_an_unreachable_server_with_once_gives_up_after_five_tries(tmp_path):
    slept: list[float] = []
    lines: list[str] = []
    assert run(options(tmp_path, "http://127.0.0.1:9", once=True), sleep=slept.append, log=lines.append) == 1
    assert slept == [1.0, 2.0, 4.0, 8.0] and len(lines) == 5


def test_a_refusal_is_not_retried_at_once_and_the_agent_keeps_running(tmp_path, server):
    _Server.answers = [403, 403, 200]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(options(tmp_path, server, interval=60.0), sleep=sleep, log=lambda line: None)
    assert slept[:2] == [60.0, 60.0] and 0 <= slept[2] <= 60.0 and len(_Server.bodies) == 3
    assert run(options(tmp_path, "http://127.0.0.1:9", once=True), sleep=lambda s: None, log=lambda s: None) == 1
    _Server.answers = [400]
    assert run(options(tmp_path, server, once=True), sleep=lambda s: None, log=lambda s: None) == 2


def test_command_line_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMAWEB_AGENT_TOKEN", "from-env")
    opts = parse(["--server", "http://x", "--cluster", "c", "--node-name", "n", "--sysfs", str(tmp_path),
                  "--proc", "/p", "--kubelet-root", "/k", "--kubelet-config", "/k/c.yaml", "--interval", "30",
                  "--once"])
    assert (opts.token, opts.interval, opts.once, str(opts.kubelet_root)) == ("from-env", 30.0, True, "/k")
    monkeypatch.delenv("NUMAWEB_AGENT_TOKEN")
    with pytest.raises(SystemExit) as exc:
        parse(["--server", "http://x", "--cluster", "c"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        parse(["--server", "http://x", "--cluster", "c", "--token", "t", "--interval", "0"])
