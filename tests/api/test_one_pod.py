"""A pod is one pod, whatever the write path: one allocation per (pod, container) and a whole-pod
allocation (pod scope) as the pod's only one; a job's pod holds only containers its template has; a
node holding allocations does not move to another cluster; one snapshot in two clusters is said."""

import pathlib

from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from numaweb.inventory.models import Allocation, Cluster
from tests.web.helpers import make_job, make_node

UPSTREAM = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data" / "snapshot" / "upstream-examples.yaml"


def _post(api, node, pod, container, cpus):
    return api.post("/api/allocations/", {"node": node.pk, "pod": pod, "container": container, "cpus": cpus},
                    format="json")


def test_a_jobs_pod_holds_only_its_templates_containers(api, cluster):
    node = make_node(cluster, "n", shape=(1, 1, 8, 1))
    make_job("one", cpus="1")  # a single container "c"
    assert _post(api, node, "default/one-t-0", "c", "1").status_code == 201
    for i, name in enumerate(("c2", "c3", "sidecar"), start=2):
        r = _post(api, node, "default/one-t-0", name, str(i))
        assert r.status_code == 400, r.content
        assert r.json()["container"] == [f"pod default/one-t-0 of job default/one has no container {name!r} "
                                         "(its containers: c)"]
    assert Allocation.objects.filter(pod="default/one-t-0").count() == 1


def test_a_whole_pod_allocation_is_the_pods_only_one(api, cluster):
    node = make_node(cluster, "n", shape=(1, 1, 8, 1))
    assert _post(api, node, "default/whole", "", "1").status_code == 201
    r = _post(api, node, "default/whole", "app", "2")
    assert r.status_code == 409 and "either one whole-pod allocation" in r.json()["detail"]
    assert _post(api, node, "default/split", "app", "3").status_code == 201
    r = _post(api, node, "default/split", "", "4")
    assert r.status_code == 409 and [h["pod"] for h in r.json()["holders"]] == ["default/split"]
    assert sorted(Allocation.objects.values_list("pod", "container")) == [("default/split", "app"),
                                                                         ("default/whole", "")]


def test_a_node_holding_allocations_does_not_move(api, cluster):
    other = Cluster.objects.create(name="other")
    node, empty = make_node(cluster, "n", shape=(1, 1, 8, 1)), make_node(cluster, "e", shape=(1, 1, 8, 1))
    assert _post(api, node, "default/p", "c", "1").status_code == 201
    r = api.patch(f"/api/nodes/{node.pk}/", {"cluster": other.pk}, format="json")
    assert r.status_code == 400
    assert r.json()["cluster"] == ["node n holds 1 allocation(s) in cluster c1; a node moves to cluster other only "
                                   "once it holds none (release them, or delete the node)"]
    node.refresh_from_db()
    assert node.cluster == cluster and Allocation.objects.get().cluster == cluster
    r = api.patch(f"/api/nodes/{empty.pk}/", {"cluster": other.pk}, format="json")
    assert r.status_code == 200 and r.json()["cluster"] == other.pk


def test_one_snapshot_in_two_clusters_is_said(db, capsys):
    call_command("import_cluster", str(UPSTREAM), "--cluster", "prod")
    call_command("import_cluster", str(UPSTREAM), "--cluster", "copy")
    notes = Cluster.objects.get(name="copy").last_import["notes"]
    assert ("3 running pod(s) of this snapshot (e.g. default/cache) are also replayed in cluster prod: the two "
            "clusters are copies of one real cluster, each holding those pods") in notes
    assert set(Allocation.objects.values_list("cluster__name", flat=True)) == {"prod", "copy"}


def test_a_kubelet_state_import_names_and_links_pods_the_snapshot_lists(api, db, tmp_path):
    """A cpu_manager_state knows pods by UID only: the node's last snapshot names them (namespace/name), so
    the allocations link to their jobs; a UID nobody names is said so."""
    import json

    import yaml

    from numaweb.jobs import services as job_services

    doc = yaml.safe_load(UPSTREAM.read_text())
    for item in doc["items"]:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "web-7d9f":
            item["metadata"]["name"] = "web-main-0"  # job web, task main, replica 0
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump(doc))
    call_command("import_cluster", str(path), "--cluster", "prod")
    prod = Cluster.objects.get(name="prod")
    res = {"cpu": "2", "memory": "1Gi"}
    web = job_services.save_job(job_services.engine_job_from_data({"name": "web", "tasks": [{
        "name": "main", "template": {"containers": [{"name": "nginx", "requests": res, "limits": res}]}}]}), prod)
    state = {"policyName": "static", "defaultCpuSet": "0-1,4,6-7", "checksum": 1,
             "entries": {"0b6b8d4e-1111-4c1e-9a55-000000000004": {"nginx": "2-3"}, "ffff-0000": {"c": "5"}}}
    upload = SimpleUploadedFile("cpu_manager_state", json.dumps(state).encode())
    r = api.post("/api/nodes/upload/", {"cluster": prod.pk, "name": "worker-node-a", "file": upload},
                 format="multipart")
    assert r.status_code == 201, r.content
    assert r.json()["notes"] == [
        "1 pod(s) named from their UID by the cluster's last snapshot (e.g. 0b6b8d4e-1111-4c1e-9a55-000000000004 is "
        "default/web-main-0)",
        "1 pod(s) are known only by their UID (e.g. ffff-0000): the file does not name them and the cluster's last "
        "snapshot does not list them on this node, so they are not linked to jobs; import a snapshot of the cluster "
        "first to name them",
        "1 pod(s) linked to their jobs by (namespace, pod name)"]
    rows = {a.pod: a for a in Allocation.objects.filter(node__name="worker-node-a")}
    assert set(rows) == {"default/web-main-0", "ffff-0000"}
    assert rows["default/web-main-0"].job == web and rows["ffff-0000"].job is None
    web.refresh_from_db()
    assert web.status == "scheduled"
