"""Issue 37 row 5: names cannot become code. make room's plan.sh quotes every value, comments included, so a
plan whose stored names hold newlines and shell syntax runs nothing when `sh plan.sh` prints it (both marker
files were created before); and names with control characters are refused on every way in: the API (nodes,
uploads, allocations), the admin, a snapshot import, a topology file, and the engine's own objects (what the
node agent builds)."""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs.models import Job
from numaweb.room.models import RoomPlan
from scheduler_core.errors import EngineError
from scheduler_core.model.node import Allocation as EngineAllocation
from scheduler_core.model.node import Node as EngineNode
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db

DATA = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data"
FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "numaweb" / "inventory" / "fixtures"


def _hostile(marker: str) -> str:
    """A name that runs `touch <marker>` if any line of the script leaves it unquoted or split."""
    return f"x\ntouch {marker}\n#'\";touch {marker}`touch {marker}`$(touch {marker})\r\ntouch {marker}"


@pytest.fixture
def hostile_plan() -> RoomPlan:
    """A stored plan whose names hold newlines and shell syntax (stored before names were checked)."""
    cluster = Cluster.objects.create(name="c")
    Cluster.objects.filter(pk=cluster.pk).update(name=_hostile("CLUSTER"))
    job = Job.objects.create(cluster=cluster, name="j", namespace="ns")
    Job.objects.filter(pk=job.pk).update(name=_hostile("JOB"), namespace=_hostile("JOBNS"))
    move = {"namespace": _hostile("NAMESPACE"), "pod": _hostile("POD"), "from_node": _hostile("FROM"),
            "from_numa": [0], "from_cpus": _hostile("FROMCPUS"), "to_node": _hostile("TO"), "to_numa": [1],
            "to_cpus": _hostile("TOCPUS"), "cpus": 2, "priority": 0}
    evict = {**move, "pod": _hostile("EVICTED")}
    return RoomPlan.objects.create(cluster=cluster, job=job, profile="aligned", status=RoomPlan.DONE,
                                   result={"found": True, "moves": [move], "evictions": [evict], "moved_cpus": 2,
                                           "after": {"session": _hostile("SESSION")}})


def _fake(bin_dir: pathlib.Path, name: str, log: pathlib.Path) -> None:
    """A stand-in for kubectl or jq that records its arguments, NUL-separated, one call a line, each call in a file
    of its own under `log` (a pipeline's commands run at once: appends to one file would interleave)."""
    path = bin_dir / name
    out = f"{log}/{name}.$$"
    path.write_text(f'#!/bin/sh\nprintf "{name}" >> {out}\nfor a in "$@"; do printf "\\0%s" "$a" >> {out}; done\n'
                    f'printf "\\n" >> {out}\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_plan_sh_with_hostile_names_runs_nothing(api, hostile_plan, tmp_path):
    r = api.get(f"/api/make-room/{hostile_plan.pk}/plan.sh")
    assert r.status_code == 200
    script = tmp_path / "plan.sh"
    script.write_bytes(r.content)
    printed = subprocess.run(["sh", str(script)], cwd=tmp_path, capture_output=True, timeout=30)
    assert printed.returncode == 0, printed.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.sh"]  # no marker file, nothing made
    # the commands it prints carry each name whole
    out = printed.stdout.decode()
    assert out.count("kubectl delete pod -n") == 2 and _hostile("POD") in out
    # with --run, kubectl and jq get every name as one argument, unchanged, and still nothing runs
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    log.mkdir()
    bin_dir.mkdir()
    for tool in ("kubectl", "jq"):
        _fake(bin_dir, tool, log)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    ran = subprocess.run(["sh", str(script), "--run"], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                         env=env)
    assert ran.returncode == 0, ran.stderr
    assert not [p for p in tmp_path.rglob("*") if p.name.isupper()]
    calls = "".join(sorted(f.read_bytes().decode() for f in log.iterdir()))
    assert f"kubectl\0delete\0pod\0-n\0{_hostile('NAMESPACE')}\0{_hostile('POD')}\0--wait=true\n" in calls
    assert f"jq\0--arg\0node\0{_hostile('TO')}\0" in calls


def test_comments_show_the_names_escaped(api, hostile_plan):
    text = api.get(f"/api/make-room/{hostile_plan.pk}/plan.sh").content.decode()
    comments = [line for line in text.split("\n") if line.startswith("#")]
    assert any("/x\\ntouch POD" in line for line in comments)  # the comment shows the newline as \n
    assert any("-> 'x\\ntouch TO" in line for line in comments)
    assert any("on cluster 'x\\ntouch CLUSTER" in line for line in comments)


def _newline(base: str) -> str:
    return base + "\nid"


def test_the_api_refuses_names_with_control_characters(api, cluster):
    body = {"cluster": cluster.pk, "name": _newline("n1"), "topology": synthetic(2, 1, 4, 2).to_dict()}
    r = api.post("/api/nodes/", body, format="json")
    assert r.status_code == 400 and "newlines" in r.json()["name"][0], r.content
    with open(FIXTURES / "24em64t-2n6c2t-pci.xml", "rb") as fh:
        r = api.post("/api/nodes/upload/", {"cluster": cluster.pk, "name": "bad\tname", "file": fh},
                     format="multipart")
    assert r.status_code == 400 and "name" in r.json(), r.content
    node = make_node(cluster, "n1")
    for field, value in (("pod", _newline("default/a")), ("pod", "default/a\x1b[2J"), ("container", "c\x07d")):
        r = api.post("/api/allocations/", {"node": node.pk, "pod": "default/a", "cpus": "0", field: value},
                     format="json")
        assert r.status_code == 400 and field in r.json(), r.content
    assert not Allocation.objects.exists() and Node.objects.count() == 1


def test_the_admin_refuses_them(admin_client):
    node = make_node(Cluster.objects.create(name="c"), "n1")
    r = admin_client.post("/admin/inventory/allocation/add/", {
        "node": node.pk, "pod": _newline("default/b"), "container": "", "cpus": "1", "memory": "{}",
        "devices": "{}", "origin": "scheduled"})
    assert r.status_code == 200 and "newlines" in r.content.decode()
    assert not Allocation.objects.exists()


def test_a_snapshot_with_them_is_refused_whole(api, cluster):
    snapshot = yaml.safe_load((DATA / "snapshot" / "upstream-examples.yaml").read_text())
    for rename in ('"node1"', '"default"'):  # a node's name, then the pods' namespace
        text = json.dumps(snapshot).replace(rename, json.dumps(_newline(rename.strip('"'))))
        r = api.post(f"/api/clusters/{cluster.pk}/import/",
                     {"file": SimpleUploadedFile("s.json", text.encode())}, format="multipart")
        assert r.status_code == 400 and "newlines" in r.json()["file"][0], (rename, r.content)
    assert not Node.objects.exists() and not Allocation.objects.exists()


def test_a_topology_file_and_the_engine_refuse_them(cluster):
    with pytest.raises(EngineError, match="newlines"):
        inventory.import_node(cluster, _newline("n"), (FIXTURES / "24em64t-2n6c2t-pci.xml").read_bytes())
    topology = synthetic(1, 1, 2, 1)
    for build in (lambda: EngineNode(_newline("n"), topology),
                  lambda: Pod("p", (Container.guaranteed("c", 1000),), namespace="a\u2028b"),
                  lambda: Pod("p", (Container.guaranteed("c\x00", 1000),)),
                  lambda: EngineAllocation.from_dict({"pod": _newline("ns/p"), "cpus": "0"})):
        with pytest.raises(EngineError, match="printable"):
            build()
    assert not Node.objects.exists()


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="c")


@pytest.fixture
def admin_client(client, db):
    from django.contrib.auth import get_user_model
    admin = get_user_model().objects.create_superuser("root", "r@example.com", "pw-long-enough")
    client.force_login(admin)
    return client


def test_the_node_page_still_shows_old_names(client, cluster):
    """Names stored before the check are shown, not refused: the page escapes them."""
    node = make_node(cluster, "n1")
    Node.objects.filter(pk=node.pk).update(name="n1\nx")
    assert client.get(reverse("pages:node", args=[node.pk])).status_code == 200
