"""Clusters, nodes (JSON and file upload) and allocations through the API; the engine validates."""

from pathlib import Path

import pytest

from numaweb.inventory.models import Allocation, Node
from scheduler_core.model.topology import synthetic
from tests.web.helpers import allocated_cpus, make_node

FIXTURES = Path(__file__).resolve().parents[2] / "numaweb" / "inventory" / "fixtures"


def node_body(cluster, name="n1", **extra):
    return {"cluster": cluster.pk, "name": name, "topology": synthetic(2, 1, 4, 2).to_dict(),
            "topology_manager_policy": "single-numa-node", **extra}


def test_reads_and_writes_need_credentials(anon, cluster, settings):
    assert anon.get("/api/clusters/").status_code == 401
    assert anon.post("/api/clusters/", {"name": "x"}, format="json").status_code == 401
    settings.NUMAWEB_PUBLIC_READ = True  # a demo site: reads open, writes still need a role
    assert anon.get("/api/clusters/").status_code == 200
    assert anon.post("/api/clusters/", {"name": "x"}, format="json").status_code == 401
    anon.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert anon.get("/api/clusters/").status_code == 401
    assert anon.post("/api/clusters/", {"name": "x"}, format="json").status_code == 401


def test_cluster_crud(api):
    r = api.post("/api/clusters/", {"name": "prod"}, format="json")
    assert r.status_code == 201, r.content
    pk = r.json()["id"]
    assert api.get(f"/api/clusters/{pk}/").json()["name"] == "prod"
    assert api.get("/api/clusters/999999/").status_code == 404
    assert api.delete(f"/api/clusters/{pk}/").status_code == 204


def test_node_from_engine_json(api, cluster):
    r = api.post("/api/nodes/", node_body(cluster), format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert (body["num_cpus"], body["num_numa_nodes"], body["num_sockets"]) == (16, 2, 2)
    assert body["generation"] == 1 and body["source_format"] == "json"
    r = api.patch(f"/api/nodes/{body['id']}/", {"topology_manager_scope": "pod"}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["generation"] == 2
    assert api.get("/api/nodes/424242/").status_code == 404


@pytest.mark.parametrize("change, field, words", [
    ({"topology": {"cpus": "nope"}}, "topology", "'cpus' must be a list"),
    ({"topology_manager_policy": "sometimes"}, "topology_manager_policy", "sometimes"),
    ({"cpu_manager_options": {"fast-please": "true"}}, "cpu_manager_options", "unknown CPU Manager Policy option"),
    ({"reserved_cpus": "0-"}, "reserved_cpus", "0-"),
    ({"reserved_cpus": "64"}, "non_field_errors", "64"),
    ({"topology_manager_options": {"max-allowable-numa-nodes": "3"}}, "topology_manager_options", "minimum"),
])
def test_node_errors_are_the_engines_per_field(api, cluster, change, field, words):
    r = api.post("/api/nodes/", node_body(cluster, **change), format="json")
    assert r.status_code == 400
    assert words in " ".join(r.json()[field])
    assert not Node.objects.exists()


def test_duplicate_node_name(api, cluster):
    assert api.post("/api/nodes/", node_body(cluster), format="json").status_code == 201
    r = api.post("/api/nodes/", node_body(cluster), format="json")
    assert r.status_code == 400 and "already has a node" in r.json()["name"][0]


def test_upload_hwloc_xml(api, cluster):
    with open(FIXTURES / "24em64t-2n6c2t-pci.xml", "rb") as fh:
        r = api.post("/api/nodes/upload/", {"cluster": cluster.pk, "name": "xml", "file": fh,
                                            "topology_manager_policy": "restricted"}, format="multipart")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["source_format"] == "hwloc-xml"
    assert (body["num_cpus"], body["num_numa_nodes"]) == (24, 2)
    assert body["topology_manager_policy"] == "restricted" and body["imported_at"]


def test_upload_refuses_garbage_and_never_reads_server_paths(api, cluster, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("CPU(s): 4\n")
    for content in (b"this is not a topology\x00\x01", str(secret).encode()):
        upload = tmp_path / "up.txt"
        upload.write_bytes(content)
        with open(upload, "rb") as fh:
            r = api.post("/api/nodes/upload/", {"cluster": cluster.pk, "name": "bad", "file": fh}, format="multipart")
        assert r.status_code == 400, r.content
        assert r.json()["file"]
    assert not Node.objects.exists()


def test_allocations_checked_by_engine(api, cluster):
    node = make_node(cluster, "n1", shape=(1, 2, 4, 1))
    r = api.post("/api/allocations/", {"node": node.pk, "pod": "default/a", "cpus": "0-2"}, format="json")
    assert r.status_code == 201, r.content
    node.refresh_from_db()
    assert node.generation == 2
    r = api.post("/api/allocations/", {"node": node.pk, "pod": "default/b", "cpus": "2-3"}, format="json")
    assert r.status_code == 409  # held by someone: a conflict, naming the CPUs and the holder
    body = r.json()
    assert body["cpus"] == "2" and [h["pod"] for h in body["holders"]] == ["default/a"]
    assert "CPUs 2 of node n1 are held by default/a" in body["detail"]
    r = api.post("/api/allocations/", {"node": node.pk, "pod": "default/c", "cpus": "99"}, format="json")
    assert r.status_code == 400 and "not on the machine" in r.json()["non_field_errors"][0]
    assert allocated_cpus(node) == [0, 1, 2]
    pk = Allocation.objects.get().pk
    assert api.delete(f"/api/allocations/{pk}/").status_code == 204
    node.refresh_from_db()
    assert node.generation == 3


def test_list_filter_params_are_validated(api, cluster):
    make_node(cluster, "n1")
    assert api.get(f"/api/nodes/?cluster={cluster.pk}").json()["count"] == 1
    assert api.get("/api/nodes/?cluster=abc").status_code == 400
    assert api.get("/api/allocations/?node=-1").status_code == 400


def test_node_list_pages_honour_page_size_within_bounds(api, cluster):
    """Nodes carry their topology: 5 a page unless ?page_size= asks (1 to 100, 400 naming it otherwise); each
    node's allocations are counted on every page, as one by one."""
    from tests.web.helpers import make_node as node_of

    nodes = [node_of(cluster, f"n{i:02d}") for i in range(12)]
    for i, node in enumerate(nodes[:7]):
        for cpu in range(i % 3):
            Allocation.objects.create(node=node, pod=f"default/p{i}-{cpu}", container="c", cpus=str(cpu))
    first = api.get("/api/nodes/").json()
    assert first["count"] == 12 and [n["name"] for n in first["results"]] == [f"n{i:02d}" for i in range(5)]
    assert "page=2" in first["next"]
    pages = [api.get("/api/nodes/", {"page_size": 7, "page": page}).json()["results"] for page in (1, 2)]
    assert [len(p) for p in pages] == [7, 5]
    counted = {n["name"]: n["allocation_count"] for page in pages for n in page}
    assert counted == {n.name: n.allocations.count() for n in nodes} and sum(counted.values()) == 6
    for size in (0, 101, "x"):
        r = api.get("/api/nodes/", {"page_size": size})
        assert r.status_code == 400 and "page_size" in r.json(), r.content
    schema = api.get("/api/schema/?format=json").json()
    size = next(p for p in schema["paths"]["/api/nodes/"]["get"]["parameters"] if p["name"] == "page_size")
    assert size["schema"]["maximum"] == 100 and "5 unless asked" in size["description"]


def test_cluster_nodes_equal_the_rows_read_one_by_one(cluster):
    """The worker's bulk read (values, settings decoded once per distinct text) builds the same engine nodes
    as reading each row and its allocations; its query count does not grow with the nodes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from numaweb.inventory import services
    from numaweb.inventory.models import Cluster

    options = {"cpu_manager_options": {"full-pcpus-only": "true"},
               "topology_manager_options": {"prefer-closest-numa-nodes": "true"},
               "memory_manager_policy": "Static", "reserved_memory": {"0": {"memory": 1 << 30}},
               "reserved_cpus": "0-1"}
    nodes = [make_node(cluster, f"n{i}", policy=("best-effort", "restricted", "single-numa-node")[i % 3],
                       **(options if i % 2 else {})) for i in range(7)]
    nodes.append(make_node(cluster, "other-shape", shape=(1, 2, 2, 2)))
    for node in nodes[::2]:  # labels as a snapshot import stores them, on some nodes
        node.labels = {"kubernetes.io/hostname": node.name, "node.koordinator.sh/numa-topology-policy": "Restricted"}
        node.save(update_fields=["labels"])
    for i, node in enumerate(nodes[:4]):
        Allocation.objects.create(cluster=cluster, node=node, pod=f"default/p{i}", container="c",
                                  cpus=f"{4 + i}", memory={"0": {"memory": 1 << 20}})
    gone = make_node(Cluster.objects.create(name="elsewhere"), "elsewhere")
    assert gone.pk

    services._TOPOLOGY_CACHE.clear()
    with CaptureQueriesContext(connection) as queries:
        engine, seen = services.cluster_nodes(cluster)
    assert len(queries) == 2 + 2  # nodes, allocations, and one topology document per shape not cached
    assert [n.name for n in engine] == sorted(n.name for n in nodes)
    for got in engine:
        row = Node.objects.get(cluster=cluster, name=got.name)
        want = services.to_engine(row, row.allocations.order_by("id"))
        assert seen[got.name] == (row.pk, row.generation)
        assert got.topology.to_dict() == want.topology.to_dict()
        assert got.kubelet == want.kubelet and got.numatopology == want.numatopology
        assert dict(got.labels) == dict(want.labels) == (services.decision_labels(row.labels) or {})
        assert got.allocations == want.allocations and got.free_cpus == want.free_cpus
        assert got.reserved_cpus == want.reserved_cpus and got.memory_used == want.memory_used
    with CaptureQueriesContext(connection) as queries:
        services.cluster_nodes(cluster)
    assert len(queries) == 2


def test_to_engine_carries_the_stored_labels_the_engine_decides_by(cluster):
    """The engine node a session reads has the Node object's labels that a model decides by (the
    koordinator profile's two), not the others (a hostname): a node without them has none."""
    from numaweb.inventory import services
    from scheduler_core.koordinator.plugin import cpu_topology, node_options

    labelled = make_node(cluster, "labelled", policy="none")
    labelled.labels = {"kubernetes.io/hostname": "labelled",
                       "node.koordinator.sh/numa-topology-policy": "SingleNUMANode",
                       "node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"}
    labelled.save()
    plain = make_node(cluster, "plain", policy="none")
    engine = services.to_engine(Node.objects.get(pk=labelled.pk), [])
    want = {k: v for k, v in labelled.labels.items() if k.startswith("node.koordinator.sh/")}
    assert dict(engine.labels) == want
    assert not services.to_engine(plain, []).labels
    plain.labels = {"kubernetes.io/hostname": "plain"}
    plain.save()
    opts = node_options(engine, cpu_topology(engine))
    assert (opts.numa_policy, opts.cpu_bind_policy) == ("SingleNUMANode", "FullPCPUsOnly")
    bulk = {n.name: n for n in services.cluster_nodes(cluster)[0]}
    assert dict(bulk["labelled"].labels) == want and not bulk["plain"].labels
