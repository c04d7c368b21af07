"""Management commands: demo, import_topology (all-or-nothing, engine errors → non-zero exit),
run_session; and the health check."""

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs.models import Job

FIXTURES = Path(__file__).resolve().parents[2] / "numaweb" / "inventory" / "fixtures"


@pytest.fixture
def _private_queue(tmp_path):
    from tests.web.helpers import filesystem_broker

    with filesystem_broker(tmp_path / "broker"):
        yield


def test_demo_builds_seed_nodes_and_more(db):
    call_command("demo")
    demo = Cluster.objects.get(name="demo")
    nodes = {n.name: n for n in demo.nodes.all()}
    assert nodes["node-1"].topology_manager_policy == "single-numa-node"
    assert (nodes["node-1"].num_cpus, nodes["node-1"].num_numa_nodes) == (32, 2)
    assert (nodes["node-2"].topology_manager_policy, nodes["node-2"].num_cpus) == ("best-effort", 32)
    assert (nodes["node-3"].topology_manager_policy, nodes["node-3"].num_cpus) == ("best-effort", 40)
    assert {n.source_format for n in nodes.values()} >= {"synthetic", "hwloc-xml"}
    assert len({n.topology_manager_policy for n in nodes.values()}) == 4
    assert Allocation.objects.filter(origin="imported").count() == 2
    assert Job.objects.count() >= 4
    call_command("demo")  # idempotent
    assert Cluster.objects.filter(name="demo").count() == 1


def test_import_topology_command(db, capsys):
    call_command("import_topology", str(FIXTURES / "24em64t-2n6c2t-pci.xml"), "--cluster", "lab",
                 "--topology-manager-policy", "restricted")
    node = Node.objects.get(cluster__name="lab")
    assert node.name == "24em64t-2n6c2t-pci" and node.source_format == "hwloc-xml"
    assert node.topology_manager_policy == "restricted" and node.num_cpus == 24


def test_import_topology_all_or_nothing(db, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("nothing to see here\n")
    with pytest.raises(CommandError, match=r"bad\.txt"):
        call_command("import_topology", str(FIXTURES / "24em64t-2n6c2t-pci.xml"), str(bad), "--cluster", "lab")
    assert not Node.objects.exists() and not Cluster.objects.exists()


def test_run_session_command(db, capsys, _private_queue):
    """A summary (counts, busiest nodes, reasons for the unplaced); --all adds every pod, --json is a document;
    piped (as here), no progress bar is drawn."""
    call_command("demo")
    capsys.readouterr()
    call_command("run_session", "--cluster", "demo", "--job", "numa-test", "--job", "vj-test", "--dry-run")
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert "done; 2/2 pods placed, 2/2 jobs" in out[0]
    assert out[1] == "  placed on 2 nodes: node-1 1 pod, node-3 1 pod"
    assert out[-1] == "(--all lists every pod, --json prints everything as JSON)"
    assert "numa-test-web-0" not in captured.out and captured.err == ""
    call_command("run_session", "--cluster", "demo", "--job", "numa-test", "--job", "vj-test", "--dry-run", "--all")
    out = capsys.readouterr().out
    assert "numa-test-web-0: node-1" in out and "vj-test-test-0: node-3" in out
    from tests.web.helpers import make_job

    make_job("too-big", cpus="4096")  # fits no node: the summary groups why
    call_command("run_session", "--cluster", "demo", "--dry-run", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["session"]["status"] == "done" and len(data["placements"]) == data["session"]["pods_total"]
    unplaced = [p for p in data["placements"] if p["node"] is None]
    assert unplaced and all(p["reason"] for p in unplaced)
    call_command("run_session", "--cluster", "demo", "--dry-run")
    out = capsys.readouterr().out
    assert f"  not placed: {len(unplaced)} pod" in out and " × " in out
    with pytest.raises(CommandError, match="unknown job"):
        call_command("run_session", "--job", "nope")


def test_import_messages_name_the_file_not_internal_labels(db, tmp_path, capsys):
    """No `<bytes>` or parser names: an unknown format says so and lists the formats tried; an XML file given
    as a cluster snapshot says what was expected; counts are singular or plural as they should be."""
    empty, text, snap = tmp_path / "empty.xml", tmp_path / "notes.txt", tmp_path / "snap.yaml"
    empty.write_text("")
    text.write_text("this is not a topology\n")
    snap.write_text((FIXTURES / "24em64t-2n6c2t-pci.xml").read_text())
    with pytest.raises(CommandError) as err:
        call_command("import_topology", str(empty))
    assert str(err.value) == "empty.xml: empty input".replace("empty.xml", str(empty))
    with pytest.raises(CommandError) as err:
        call_command("import_topology", str(text))
    assert str(err.value).startswith(f"{text}: format not recognised (tried: hwloc-xml, lscpu-text, ")
    with pytest.raises(CommandError) as err:
        call_command("import_cluster", str(snap))
    assert str(err.value).startswith(f"{snap}: XML is not a kubectl snapshot; expected the YAML or JSON")
    single = tmp_path / "one.txt"
    single.write_text("pack:1 core:2 pu:1\n")
    call_command("import_topology", str(single))
    assert capsys.readouterr().out.strip() == "default/one: 2 CPUs, 1 NUMA node (synthetic)"


def test_long_commands_show_progress_on_a_terminal_only(db, monkeypatch, capsys):
    import io
    import sys

    call_command("demo", "--nodes", "20", "--cluster", "piped")
    assert capsys.readouterr().err == ""  # captured, not a terminal: no bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    call_command("demo", "--nodes", "20", "--cluster", "tty")
    assert "nodes:" in terminal.getvalue() and "/20 [" in terminal.getvalue()


def test_commands_on_a_database_never_migrated_say_what_to_do(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "NUMAWEB_DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    for args in (["import_topology", "missing.xml"], ["demo"], ["run_session"]):
        out = subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env, capture_output=True, text=True)
        assert out.returncode == 1, out.stderr
        assert "the database is not set up: run `python manage.py migrate` first" in out.stderr
        assert "Traceback" not in out.stderr


def test_demo_large_cluster_of_real_machines_and_pending_pods(db):
    from numaweb.inventory.services import cluster_nodes

    call_command("demo", "--nodes", "120", "--pods", "300", "--cluster", "big")
    big = Cluster.objects.get(name="big")
    assert big.nodes.count() == 120
    jobs = Job.objects.filter(namespace="big", status=Job.PENDING).prefetch_related("tasks")
    assert sum(j.replicas for j in jobs) == 300
    nodes = list(big.nodes.all())
    assert len({n.fingerprint for n in nodes}) >= 6  # several real machines, not one synthetic shape
    assert {n.topology_manager_policy for n in nodes} == {"none", "best-effort", "restricted", "single-numa-node"}
    assert {n.topology_manager_scope for n in nodes} == {"container", "pod"}
    assert any(n.reserved_cpus for n in nodes) and any(n.cpu_manager_options for n in nodes)
    assert any(d["resource"] == "nvidia.com/gpu" for n in nodes for d in n.topology.get("devices") or ())
    assert Allocation.objects.filter(node__cluster=big, origin=Allocation.IMPORTED).exists()
    engine_nodes, _seen = cluster_nodes(big)  # every node and allocation is valid for the engine
    assert len(engine_nodes) == 120
    assert any(j.min_available for j in jobs) and any(j.min_available is None for j in jobs)
    first = sorted(n.name for n in nodes)
    call_command("demo", "--nodes", "120", "--pods", "300", "--cluster", "big")  # same seed: same cluster
    assert sorted(Node.objects.filter(cluster__name="big").values_list("name", flat=True)) == first
    assert sum(j.replicas for j in Job.objects.filter(namespace="big")) == 300


def test_demo_rejects_bad_sizes(db):
    with pytest.raises(CommandError, match="--pods needs --nodes"):
        call_command("demo", "--pods", "5")
    with pytest.raises(CommandError, match="--nodes must be at least 1"):
        call_command("demo", "--nodes", "0")
    with pytest.raises(CommandError, match="whole number"):
        call_command("demo", "--nodes", "many")
