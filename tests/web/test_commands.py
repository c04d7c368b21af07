"""Management commands: demo, import_topology (all-or-nothing, engine errors → non-zero exit),
run_session; and the health check."""

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
    call_command("demo")
    call_command("run_session", "--cluster", "demo", "--job", "numa-test", "--job", "vj-test")
    out = capsys.readouterr().out
    assert "done; 2/2 pods placed" in out
    assert "numa-test-web-0: node-1" in out and "vj-test-test-0: node-3" in out
    with pytest.raises(CommandError, match="unknown job"):
        call_command("run_session", "--job", "nope")


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
