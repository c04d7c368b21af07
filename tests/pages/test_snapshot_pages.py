"""The snapshot import form, the pages after an import (replayed allocations, a session scheduling
the pending jobs), and the node page's kubelet state check (grid with mismatches highlighted)."""

import json
import pathlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from numaweb.inventory import services
from numaweb.inventory.models import Allocation, Cluster, Node
from scheduler_core.cpuset import CPUSet
from tests.pages.helpers import grid_cells, parse

pytestmark = pytest.mark.django_db

DATA = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data"
UPSTREAM = DATA / "snapshot" / "upstream-examples.yaml"
SEED = DATA / "seeds"


def _upload(path_or_bytes, name="snapshot.yaml"):
    data = path_or_bytes.read_bytes() if isinstance(path_or_bytes, pathlib.Path) else path_or_bytes
    return SimpleUploadedFile(name, data)


def _import(client, path) -> str:
    """The page's two steps: the preview (a dry run, nothing changed), then its confirmation."""
    html = client.post(reverse("pages:cluster-import"), {"cluster": "prod", "file": _upload(path)}).content.decode()
    assert "Nothing has been changed yet" in html
    token = html.split('name="upload" value="')[1].split('"')[0]
    return client.post(reverse("pages:cluster-import"), {"cluster": "prod", "upload": token}).content.decode()


def test_import_form_then_node_page_shows_replayed_allocations(client):
    html = _import(client, UPSTREAM)
    assert "Cluster prod: imported" in html
    assert "node1: NUMA 0: the NodeResourceTopology says 10 CPUs available, the replay leaves 1" in html
    node1 = Node.objects.get(name="node1")
    page = client.get(reverse("pages:node", args=[node1.pk])).content.decode()
    assert "ml/train-worker-0" in page and "replayed" in page
    cells = {c["data-cpu"]: c for c in grid_cells(page, "grid")}
    assert cells["9"]["data-owner"] == "ml/train-worker-0" and cells["9"]["data-state"] == "used"
    assert "Cluster prod: nothing changed" in _import(client, UPSTREAM)


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
    call_command("run_session", "--cluster", "prod", "--profile", "aligned", "--job", "numa-job", "--job", "lonely",
                 "--all")
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


def test_state_check_grid_headers_count_the_files_containers(client, seed_node):
    state = (SEED / "seed001-cpu_manager_state.json").read_bytes()
    html = client.post(reverse("pages:node-check-state", args=[seed_node.pk]),
                       {"cpu_state": _upload(state, "cpu_manager_state")}).content.decode()
    grid = html[html.index('id="grid"'):]
    boxes = [a for t, a in parse(grid).elements if t == "div" and "data-free" in a and "data-numa" in a]
    cells = grid_cells(html, "grid")
    assert boxes and sum(int(b["data-cpus"]) for b in boxes) == len(cells)
    for b in boxes:
        mine = [c for c in cells if c["data-numa"] == b["data-numa"]]
        assert int(b["data-free"]) == sum(c["data-state"] == "free" for c in mine) < len(mine)
        assert f'NUMA {b["data-numa"]} · {b["data-free"]}/{b["data-cpus"]} free' in grid


def test_state_check_of_an_empty_file_has_nothing_to_compare(client, seed_node):
    html = client.post(reverse("pages:node-check-state", args=[seed_node.pk]),
                       {"cpu_state": _upload(b'{"policyName": "static", "defaultCpuSet": "0-31"}',
                                             "cpu_manager_state")}).content.decode()
    assert "Nothing to compare" in html and 'data-match="empty"' in html and "containers match" not in html


def test_demo_showcase_node_agrees_with_its_own_policy(demo):
    """srv-gpu-1 (restricted, pod scope) holds the seed's two containers where its own kubelet puts them:
    its state file, written from what it holds, matches the model's replay."""
    from numaweb.inventory import checks

    node = Node.objects.get(cluster=demo, name="srv-gpu-1")
    held = list(node.allocations.all())
    assert len(held) == 2
    topo = services.topology_of(node)
    for a in held:  # each fits one NUMA node, as restricted with pod scope demands of a 9-CPU pod
        assert len({topo.cpu_info[c].numa for c in CPUSet.parse(a.cpus)}) == 1
    assigned = CPUSet.parse(",".join(a.cpus for a in held))
    state = {"policyName": "static", "defaultCpuSet": str(CPUSet(topo.all_cpus & ~assigned.mask)),
             "entries": {a.pod.split("/")[1]: {a.container: a.cpus} for a in held}}
    result = checks.check_node_state(node, json.dumps(state))
    assert not result.mismatches and not result.reasons and result.verdict == "all 2 containers match"
