"""Imports that cannot destroy: every empty-snapshot variant is refused on the command (exit 1), the API
(400) and the page (an error under the form) and leaves the cluster as it was; removing nodes is explicit
(--prune / prune=true); a dry run (command, API, the page's first step) changes nothing."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from numaweb.inventory.management.commands.import_cluster import Command as ImportCluster
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs.models import Job
from numaweb.scheduling.models import SchedulingSession

ROOT = pathlib.Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "formats" / "data" / "snapshot" / "upstream-examples.yaml"
ONLY_PODS = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
    i for i in yaml.safe_load(UPSTREAM.read_text())["items"] if i["kind"] == "Pod"]})
EMPTY = {"empty file": "", "whitespace": "\n\n  \n", "items: []": "apiVersion: v1\nkind: List\nitems: []\n",
         "JSON items: []": '{"apiVersion": "v1", "kind": "List", "items": []}', "only pods": ONLY_PODS}

pytestmark = pytest.mark.django_db


def state() -> dict:
    """Everything an import may touch: row counts, and each node's generation and removed flag."""
    return {"rows": (Node.objects.count(), Allocation.objects.count(), Job.objects.count(), Cluster.objects.count(),
                     SchedulingSession.objects.count()),
            "nodes": sorted(Node.objects.values_list("name", "generation", "removed_at")),
            "allocations": sorted(Allocation.objects.values_list("pod", "container", "cpus", "node__name")),
            "cluster": list(Cluster.objects.values_list("name", "imported_at", "last_import"))}


@pytest.fixture
def prod(db):
    call_command("import_cluster", str(UPSTREAM), "--cluster", "prod")
    return Cluster.objects.get(name="prod")


def _newer(tmp_path) -> pathlib.Path:
    """The upstream snapshot without node5 (its NRT, Numatopology and Node objects)."""
    doc = yaml.safe_load(UPSTREAM.read_text())
    doc["items"] = [i for i in doc["items"] if i["metadata"].get("name") != "node5"
                    and (i.get("spec") or {}).get("nodeName") != "node5"]
    path = tmp_path / "newer.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("variant", sorted(EMPTY))
def test_empty_snapshots_are_refused_by_the_command(prod, tmp_path, variant):
    path = tmp_path / "blank.yaml"
    path.write_text(EMPTY[variant])
    before = state()
    with pytest.raises(CommandError, match="the snapshot lists no node"):
        call_command("import_cluster", str(path), "--cluster", "prod")
    assert state() == before
    # asked for, it imports: the nodes it does not list are reported, not removed
    call_command("import_cluster", str(path), "--cluster", "prod", "--allow-empty")
    report = Cluster.objects.get(name="prod").last_import
    assert report["nodes_missing"] == ["node1", "node5", "worker-node-a"] and report["nodes_removed"] == []
    assert not Node.objects.exclude(removed_at=None).exists()


def test_the_command_exits_1(prod, tmp_path, capsys):
    path = tmp_path / "blank.yaml"
    path.write_text("\n\n")
    with pytest.raises(SystemExit) as exc:  # as from the shell (manage.py runs commands this way)
        ImportCluster().run_from_argv(["manage.py", "import_cluster", str(path), "--cluster", "prod"])
    assert exc.value.code == 1 and "the snapshot lists no node" in capsys.readouterr().err


@pytest.mark.parametrize("variant", sorted(EMPTY))
def test_empty_snapshots_are_refused_by_the_api(api, prod, variant):
    before = state()
    r = api.post(f"/api/clusters/{prod.pk}/import/", {"file": SimpleUploadedFile("s.yaml", EMPTY[variant].encode())},
                 format="multipart")
    assert r.status_code == 400 and "the snapshot lists no node" in r.json()["file"][0], r.content
    assert state() == before
    r = api.post(f"/api/clusters/{prod.pk}/import/?allow_empty=true",
                 {"file": SimpleUploadedFile("s.yaml", EMPTY[variant].encode())}, format="multipart")
    assert r.status_code == 200 and r.json()["nodes_missing"] == ["node1", "node5", "worker-node-a"]


@pytest.mark.parametrize("variant", sorted(EMPTY))
def test_empty_snapshots_are_refused_by_the_page(admin_client, prod, variant):
    before = state()
    for step in ({"file": SimpleUploadedFile("s.yaml", EMPTY[variant].encode())},):
        response = admin_client.post(reverse("pages:cluster-import"), {"cluster": "prod", **step})
        assert response.status_code == 400 and "the snapshot lists no node" in response.content.decode()
    assert state() == before


def test_pruning_is_explicit(prod, tmp_path, capsys):
    newer = _newer(tmp_path)
    call_command("import_cluster", str(newer), "--cluster", "prod")
    assert "not in the snapshot, kept (--prune to flag it removed): node5" in capsys.readouterr().out
    node5 = Node.objects.get(name="node5")
    assert node5.removed_at is None and Cluster.objects.get(name="prod").last_import["nodes_missing"] == ["node5"]
    call_command("import_cluster", str(newer), "--cluster", "prod", "--prune")
    assert Node.objects.get(name="node5").removed_at is not None
    assert Cluster.objects.get(name="prod").last_import["nodes_removed"] == ["node5"]


def test_dry_runs_change_nothing_on_every_path(api, admin_client, prod, tmp_path, capsys):
    newer = _newer(tmp_path)
    before = state()
    call_command("import_cluster", str(newer), "--cluster", "prod", "--dry-run", "--prune")
    out = capsys.readouterr().out
    assert out.startswith("dry run: nothing was changed") and "removed (flagged): node5" in out
    assert state() == before
    # a new cluster is not created by a preview either
    call_command("import_cluster", str(newer), "--cluster", "fresh", "--dry-run")
    assert "nodes: 2 added" in capsys.readouterr().out and state() == before

    r = api.post(f"/api/clusters/{prod.pk}/import/?dry_run=true&prune=true",
                 {"file": SimpleUploadedFile("s.yaml", newer.read_bytes())}, format="multipart")
    assert r.status_code == 200 and r.json()["dry_run"] is True and r.json()["nodes_removed"] == ["node5"]
    assert r.json()["nodes_unchanged"] == 2 and r.json()["allocations_dropped"] == Allocation.objects.filter(
        node__name="node5", origin="replayed").count()
    assert state() == before

    upload = SimpleUploadedFile("s.yaml", newer.read_bytes())
    page = admin_client.post(reverse("pages:cluster-import"), {"cluster": "prod", "prune": "on", "file": upload})
    html = page.content.decode()
    assert page.status_code == 200 and "Nothing has been changed yet" in html and 'id="confirm-import"' in html
    assert state() == before
    kept = html.split('name="upload" value="')[1].split('"')[0]
    done = admin_client.post(reverse("pages:cluster-import"), {"cluster": "prod", "prune": "on", "upload": kept})
    assert done.status_code == 200 and "Cluster prod: imported" in done.content.decode()
    assert Node.objects.get(name="node5").removed_at is not None
    again = admin_client.post(reverse("pages:cluster-import"), {"cluster": "prod", "upload": kept})
    assert again.status_code == 400 and "no longer kept" in again.content.decode()


def test_a_pod_moving_off_a_node_kept_without_prune(prod, tmp_path):
    """Without --prune the node stays, but a pod the snapshot shows running elsewhere is replayed there
    and released here (a pod holds resources on one node)."""
    doc = yaml.safe_load(UPSTREAM.read_text())
    items = [i for i in doc["items"] if i["metadata"].get("name") != "node1"]
    for item in items:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "cache":
            item["spec"]["nodeName"] = "worker-node-a"
            item["spec"]["initContainers"] = []
            item["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"
    doc["items"] = items
    path = tmp_path / "moved.yaml"
    path.write_text(yaml.safe_dump(doc))
    call_command("import_cluster", str(path), "--cluster", "prod")
    held = {(a.pod, a.container): a.node.name for a in Allocation.objects.select_related("node")}
    assert held[("default/cache", "redis")] == "worker-node-a"
    assert Node.objects.get(name="node1").removed_at is None
    assert Cluster.objects.get(name="prod").last_import["nodes_missing"] == ["node1"]
