"""The snapshot import form, the pages after an import (replayed allocations, a session scheduling
the pending jobs), and the node page's kubelet state check (grid with mismatches highlighted)."""

import pathlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from numaweb.inventory import services
from numaweb.inventory.models import Allocation, Cluster, Node
from scheduler_core.model.cpuset import CPUSet
from tests.pages.helpers import grid_cells

pytestmark = pytest.mark.django_db

DATA = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data"
UPSTREAM = DATA / "snapshot" / "upstream-examples.yaml"
SEED = DATA / "seeds"


def _upload(path_or_bytes, name="snapshot.yaml"):
    data = path_or_bytes.read_bytes() if isinstance(path_or_bytes, pathlib.Path) else path_or_bytes
    return SimpleUploadedFile(name, data)


def test_import_form_then_node_page_shows_replayed_allocations(client):
    html = client.post(reverse("pages:cluster-import"), {"cluster": "prod", "file": _upload(UPSTREAM)}).content.decode()
    assert "Cluster prod: imported" in html
    assert "node1: NUMA 0: the NodeResourceTopology says 10 CPUs available, the replay leaves 1" in html
    node1 = Node.objects.get(name="node1")
    page = client.get(reverse("pages:node", args=[node1.pk])).content.decode()
    assert "ml/train-worker-0" in page and "replayed" in page
    cells = {c["data-cpu"]: c for c in grid_cells(page, "grid")}
    assert cells["9"]["data-owner"] == "ml/train-worker-0" and cells["9"]["data-state"] == "used"
    again = client.post(reverse("pages:cluster-import"), {"cluster": "prod", "file": _upload(UPSTREAM)})
    assert "Cluster prod: nothing changed" in again.content.decode()


def test_import_form_errors_inline(client):
    response = client.post(reverse("pages:cluster-import"), {"cluster": "prod", "file": _upload(b"kind: List\n"
                                                                                                  b"items: [3]\n")})
    assert response.status_code == 400
    assert "is not an object" in response.content.decode()
    assert not Cluster.objects.filter(name="prod").exists()


def test_session_schedules_the_pending_jobs_around_the_replayed_pods(client, capsys):
    """Volcano's plugin sees only nodes that publish a Numatopology, so under the volcano profile the
    NUMA-policy tasks stay pending (node1 and worker-node-a have only an NRT, node5's CPU Manager is
    none); the kubelet-aligned profile, which asks each node's kubelet model, places them."""
    call_command("import_cluster", str(UPSTREAM), "--cluster", "prod")
    call_command("run_session", "--cluster", "prod", "--job", "numa-job", "--job", "lonely", "--dry-run")
    out = capsys.readouterr().out
    assert "0/4 pods placed" in out and "numa info is empty" in out
    call_command("run_session", "--cluster", "prod", "--profile", "aligned", "--job", "numa-job", "--job", "lonely")
    out = capsys.readouterr().out
    assert "4/4 pods placed, 2/2 jobs, 3 nodes" in out, out
    assert Allocation.objects.filter(origin="scheduled").count() == 4
    for node in Node.objects.all():
        taken: set[int] = set()
        for a in Allocation.objects.filter(node=node):
            cpus = set(CPUSet.parse(a.cpus))
            assert not cpus & taken, (node.name, a.pod)
            taken |= cpus
    node1 = Node.objects.get(name="node1")
    replayed = {a.cpus for a in Allocation.objects.filter(node=node1, origin="replayed")}
    assert replayed == {"5-8", "9-18", "25-34"}
    page = client.get(reverse("pages:node", args=[node1.pk])).content.decode()
    assert "replayed" in page and "ml/train-worker-1" in page
    placed_on = Node.objects.get(name=out.split("numa-job-ps-0: ")[1].split()[0])
    page = client.get(reverse("pages:node", args=[placed_on.pk])).content.decode()
    assert "scheduled" in page and "numa-job-ps-0" in page


# -- kubelet state check --------------------------------------------------------------------------------
@pytest.fixture
def seed_node():
    cluster = Cluster.objects.create(name="seed")
    return services.import_node(cluster, "node-1", (SEED / "seed001-lscpu.txt").read_bytes(), None,
                                {"topology_manager_policy": "single-numa-node", "reserved_cpus": "0"})


def test_node_page_has_the_check_form(client, seed_node):
    page = client.get(reverse("pages:node", args=[seed_node.pk])).content.decode()
    assert reverse("pages:node-check-state", args=[seed_node.pk]) in page and 'name="cpu_state"' in page


def test_state_check_page_seed_all_match(client, seed_node):
    state = (SEED / "seed001-cpu_manager_state.json").read_bytes()
    html = client.post(reverse("pages:node-check-state", args=[seed_node.pk]),
                       {"cpu_state": _upload(state, "cpu_manager_state")}).content.decode()
    assert "all 2 containers match" in html and 'data-match="true"' in html
    cells = {c["data-cpu"]: c for c in grid_cells(html, "grid")}
    assert not any(c.get("data-highlight") for c in cells.values())
    assert cells["16"]["data-owner"].endswith("/container-1")


def test_state_check_page_altered_file_highlights_the_mismatch(client, seed_node):
    state = (SEED / "seed001-cpu_manager_state.json").read_bytes().replace(b'"16-24"', b'"17-25"')
    response = client.post(reverse("pages:node-check-state", args=[seed_node.pk]),
                           {"cpu_state": _upload(state, "cpu_manager_state")})
    html = response.content.decode()
    assert "1 of 2 containers do not match" in html and 'class="mismatch"' in html
    cells = {c["data-cpu"]: c for c in grid_cells(html, "grid")}
    assert {cpu for cpu, c in cells.items() if c.get("data-highlight")} == {"16", "25"}
    assert not Allocation.objects.filter(node=seed_node).exists()


def test_state_check_page_bad_file_inline_error(client, seed_node):
    response = client.post(reverse("pages:node-check-state", args=[seed_node.pk]),
                           {"cpu_state": _upload(b"{nope", "cpu_manager_state")})
    assert response.status_code == 400 and "invalid JSON" in response.content.decode()
