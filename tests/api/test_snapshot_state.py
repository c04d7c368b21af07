"""`POST /api/clusters/<id>/import/` (kubectl snapshot) and `POST /api/nodes/<id>/check-state/`."""

import io
import pathlib

from numaweb.inventory import services
from numaweb.inventory.models import Allocation, Node

DATA = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data"
UPSTREAM = DATA / "snapshot" / "upstream-examples.yaml"
SEED = DATA / "seeds"


def _file(data: bytes, name: str) -> io.BytesIO:
    fh = io.BytesIO(data)
    fh.name = name
    return fh


def test_import_snapshot_then_again(api, cluster):
    r = api.post(f"/api/clusters/{cluster.pk}/import/", {"file": _file(UPSTREAM.read_bytes(), "s.yaml")},
                 format="multipart")
    assert r.status_code == 200, r.content
    body = r.json()
    assert sorted(body["nodes_added"]) == ["node1", "node5", "worker-node-a"] and body["changed"]
    assert body["allocations_replayed"] == 3 and any("node1: NUMA 0" in d for d in body["disagreements"])
    assert Allocation.objects.filter(node__cluster=cluster, origin="replayed").count() == 3
    again = api.post(f"/api/clusters/{cluster.pk}/import/", {"file": _file(UPSTREAM.read_bytes(), "s.yaml")},
                     format="multipart").json()
    assert not again["changed"] and again["nodes_unchanged"] == 3
    node = api.get(f"/api/nodes/{Node.objects.get(name='node5').pk}/").json()
    assert node["source_format"] == "numatopo+nrt"


def test_import_bad_snapshot_is_400_and_writes_nothing(api, cluster):
    bad = b"kind: List\nitems:\n- kind: Numatopology\n  metadata: {name: n}\n  spec: {cpuDetail: {x: {}}}\n"
    r = api.post(f"/api/clusters/{cluster.pk}/import/", {"file": _file(bad, "bad.yaml")}, format="multipart")
    assert r.status_code == 400
    assert "node n" in r.json()["file"][0] and "'x' is not an integer" in r.json()["file"][0]
    assert not Node.objects.exists()
    r = api.post(f"/api/clusters/{cluster.pk}/import/", {}, format="multipart")
    assert r.status_code == 400 and "file" in r.json()


def test_import_needs_login(anon, cluster):
    r = anon.post(f"/api/clusters/{cluster.pk}/import/", {"file": _file(UPSTREAM.read_bytes(), "s.yaml")},
                  format="multipart")
    assert r.status_code in (401, 403)
    assert not Node.objects.exists()


def _seed_node(cluster) -> Node:
    return services.import_node(cluster, "node-1", (SEED / "seed001-lscpu.txt").read_bytes(), None,
                                {"topology_manager_policy": "single-numa-node", "reserved_cpus": "0"})


def test_check_state_on_the_seed_and_an_altered_file(api, cluster):
    node = _seed_node(cluster)
    state = (SEED / "seed001-cpu_manager_state.json").read_bytes()
    r = api.post(f"/api/nodes/{node.pk}/check-state/", {"cpu_state": _file(state, "cpu_manager_state")},
                 format="multipart")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["match"] and body["verdict"] == "all 2 containers match"
    assert [c["predicted_cpus"] for c in body["containers"]] == ["1-9", "16-24"]
    altered = state.replace(b'"16-24"', b'"17-25"')
    body = api.post(f"/api/nodes/{node.pk}/check-state/", {"cpu_state": _file(altered, "cpu_manager_state")},
                    format="multipart").json()
    assert body["mismatches"] == 1 and not body["match"]
    bad = [c for c in body["containers"] if not c["match"]]
    assert (bad[0]["predicted_cpus"], bad[0]["actual_cpus"]) == ("16-24", "17-25")
    assert not Allocation.objects.filter(node=node).exists()  # read-only


def test_check_state_bad_input_is_400(api, cluster):
    node = _seed_node(cluster)
    r = api.post(f"/api/nodes/{node.pk}/check-state/", {"cpu_state": _file(b"[1, 2]", "x")}, format="multipart")
    assert r.status_code == 400 and "must be a JSON object" in r.json()["cpu_state"][0]
    r = api.post(f"/api/nodes/{node.pk}/check-state/", {}, format="multipart")
    assert r.status_code == 400 and "cpu_state" in r.json()
