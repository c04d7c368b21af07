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


def test_health_check(client, db):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.post("/healthz").status_code == 405


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
