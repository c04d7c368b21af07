"""The node agent end to end on this very machine (issue 32): `python -m scheduler_core.agent --once` reads the
real /sys and /proc and a kubelet root holding a cpu_manager_state that pins one container, and reports to the
web server `manage.py serve` runs (started here, as the other server tests start it). The node appears with
exactly the machine's CPUs, NUMA nodes, memory and PCI devices and the container's CPUs as observed; a second
identical run changes nothing; a checkpoint without the container removes it; the agent's token reads nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from scheduler_core.model.cpuset import CPUSet
from tests.servers import product_web_server

ROOT = Path(__file__).resolve().parents[2]
SYS = Path("/sys/devices/system")
POD = "0b0e1f1e-aaaa-bbbb-cccc-000000000001"
IMPORTANT_BASES = {0x00, 0x01, 0x02, 0x03, 0x0B, 0x12}  # lstopo's default PCI filter, bridges left out
IMPORTANT_CLASSES = {0x0C04, 0x0C06, 0x0502}


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def call(base: str, token: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agent")
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    # the test runs the agent three times in a row: no per-node interval between its reports
    env.update(NUMAWEB_DATA_DIR=str(folder / "data"), WEB_CONCURRENCY="1", PYTHONUNBUFFERED="1",
               NUMAWEB_AGENT_MIN_INTERVAL="0")
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "collectstatic", "--noinput", "-v0")
    admin = manage(env, "create_user", "root", "--role", "admin").split()[-1]
    with product_web_server(env, folder / "web.log") as base:
        status, _ = call(base, admin, "/api/clusters/", {"name": "here"})
        assert status == 201
        agent = manage(env, "create_user", "agent-here", "--role", "agent", "--cluster", "here").split()[-1]
        yield {"base": base, "admin": admin, "agent": agent, "folder": folder}


def machine() -> dict:
    """What this machine's sysfs says, read here without the engine: online CPUs, NUMA nodes with their CPUs
    and memory, and the PCI functions of the classes lstopo shows."""
    online = CPUSet.parse((SYS / "cpu/online").read_text().strip())
    nodes = {}
    for folder in sorted(SYS.glob("node/node[0-9]*")):
        cpus = CPUSet.parse((folder / "cpulist").read_text().strip()) & online
        total = next(int(line.split()[3]) for line in (folder / "meminfo").read_text().splitlines()
                     if "MemTotal:" in line)
        nodes[int(folder.name[4:])] = (sorted(cpus), total * 1024)
    devices = set()
    for dev in Path("/sys/bus/pci/devices").iterdir():
        cls = int((dev / "class").read_text(), 16) >> 8
        if cls >> 8 in IMPORTANT_BASES or cls in IMPORTANT_CLASSES:
            devices.add(dev.name)
    return {"cpus": sorted(online), "nodes": nodes, "devices": devices}


def run_agent(site: dict, kubelet: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scheduler_core.agent", "--once", "--server", site["base"],
                           "--cluster", "here", "--node-name", "this-machine", "--kubelet-root", str(kubelet),
                           "--kubelet-config", str(kubelet / "config.yaml")],
                          cwd=ROOT, env={**os.environ, "NUMAWEB_AGENT_TOKEN": site["agent"]}, capture_output=True,
                          text=True, timeout=120)


def test_the_agent_on_this_machine(site, tmp_path):
    here = machine()
    pinned = here["cpus"][-1]
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    state = kubelet / "cpu_manager_state"
    rest = str(CPUSet(c for c in here["cpus"] if c != pinned))
    state.write_text(json.dumps({"policyName": "static", "defaultCpuSet": rest,
                                 "entries": {POD: {"app": str(pinned)}}, "checksum": 1}))
    first = run_agent(site, kubelet)
    assert first.returncode == 0, first.stderr
    _status, nodes = call(site["base"], site["admin"], "/api/nodes/")
    node = next(n for n in nodes["results"] if n["name"] == "this-machine")
    topology = node["topology"]
    assert sorted(c["cpu"] for c in topology["cpus"]) == here["cpus"]
    assert {n["id"]: n["memory"] for n in topology["numa_nodes"]} == {n: m for n, (_c, m) in here["nodes"].items()}
    assert {n: sorted(c["cpu"] for c in topology["cpus"] if c["numa"] == n) for n in here["nodes"]} == {
        n: cpus for n, (cpus, _m) in here["nodes"].items()}
    assert {d["id"] for d in topology["devices"]} == here["devices"]
    assert sorted(p["bus_id"] for p in node["agent"]["pci_devices"]) == sorted(
        d.name for d in Path("/sys/bus/pci/devices").iterdir())
    _status, held = call(site["base"], site["admin"], f"/api/allocations/?node={node['id']}")
    rows = held["results"]
    assert [(a["pod"], a["container"], a["cpus"], a["origin"]) for a in rows] == [(POD, "app", str(pinned),
                                                                                   "observed")]
    assert node["agent"]["stale"] is False

    # the same node again: nothing written
    again = run_agent(site, kubelet)
    assert again.returncode == 0 and "unchanged" in again.stderr, again.stderr
    _status, same = call(site["base"], site["admin"], f"/api/nodes/{node['id']}/")
    assert same["generation"] == node["generation"] and same["agent"]["changed_at"] == node["agent"]["changed_at"]
    assert call(site["base"], site["admin"], f"/api/allocations/?node={node['id']}")[1]["results"] == rows

    # the kubelet let the container go: so does the node
    state.write_text(json.dumps({"policyName": "static", "defaultCpuSet": str(CPUSet(here["cpus"])),
                                 "checksum": 2}))
    gone = run_agent(site, kubelet)
    assert gone.returncode == 0 and "unchanged" not in gone.stderr and "changed" in gone.stderr, gone.stderr
    assert call(site["base"], site["admin"], f"/api/allocations/?node={node['id']}")[1]["results"] == []
    assert call(site["base"], site["admin"], f"/api/nodes/{node['id']}/")[1]["generation"] > node["generation"]

    # the agent's token sends reports, and reads nothing
    assert call(site["base"], site["agent"], "/api/jobs/")[0] == 403
    assert call(site["base"], site["agent"], f"/api/nodes/{node['id']}/")[0] == 403

