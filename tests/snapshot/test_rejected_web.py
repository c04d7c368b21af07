"""Rejected pods in the API (`GET /api/pods/?cluster=&status=rejected[&reason=&node=]`, the cluster-wide
counts) and on the pages (pod search, the node page, the pod's page, the cluster's view)."""

import pytest

from numaweb.inventory.models import Cluster, Node, RejectedPod
from numaweb.inventory.snapshot import import_snapshot

from .rejected_snapshot import as_yaml, every_reason

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    cluster = Cluster.objects.create(name="prod")
    import_snapshot(cluster, as_yaml(every_reason()))
    return cluster


def test_api_lists_rejected_pods_with_explanation_and_remedies(cluster, viewer_api):
    response = viewer_api.get(f"/api/pods/?cluster={cluster.pk}&status=rejected")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 4
    row = next(r for r in body["results"] if r["name"] == "train-worker-0")
    for key in ("status", "reason", "message", "explanation", "remedies"):
        assert key in row
    assert row["status"] == "rejected" and row["reason"] == "TopologyAffinityError"
    assert row["node"]["name"] == "gpu-a" and row["job"] == "train" and row["gang"] == "train-group"
    assert "NUMA 1" in row["explanation"]["sentence"] and row["remedies"][0]["kind"] == "other-node"
    assert row["url"].endswith(f"/rejected/{RejectedPod.objects.get(name='train-worker-0').pk}/")
    by_reason = viewer_api.get(f"/api/pods/?cluster={cluster.pk}&status=rejected&reason=SMTAlignmentError").json()
    assert [r["name"] for r in by_reason["results"]] == ["smt"]
    by_node = viewer_api.get(f"/api/pods/?cluster={cluster.pk}&status=rejected&node=gpu-b").json()
    assert [r["name"] for r in by_node["results"]] == ["ghost"]


@pytest.mark.parametrize(("query", "field"), [("status=held", "status"), ("status=rejected&reason=OutOfcpu", "reason"),
                                              ("status=rejected&cluster=", "cluster"), ("reason=", "reason"),
                                              ("status=rejected&cluster=x", "cluster")])
def test_api_bad_filters_are_400_naming_the_field(cluster, viewer_api, query, field):
    response = viewer_api.get(f"/api/pods/?{query}")
    assert response.status_code == 400 and field in response.json(), response.content


def test_an_unknown_cluster_filters_everything_out(cluster, viewer_api):
    """As on the other lists (jobs, sessions): a cluster id that names no cluster matches no pod."""
    for query in ("status=rejected&cluster=999999", "q=train&cluster=999999"):
        response = viewer_api.get(f"/api/pods/?{query}")
        assert response.status_code == 200 and response.json() == {"count": 0, "results": []}, query


def test_search_without_status_lists_rejected_pods_too(cluster, viewer_api):
    body = viewer_api.get("/api/pods/?q=train").json()
    assert any(r.get("status") == "rejected" and r["name"] == "train-worker-0" for r in body["results"])


def test_cluster_summary(cluster, viewer_api):
    body = viewer_api.get(f"/api/clusters/{cluster.pk}/rejected/").json()
    assert body["rejected"] == 4 and body["not_reproduced"] == 1
    assert {e["key"]: e["pods"] for e in body["by_reason"]} == {
        "TopologyAffinityError": 2, "SMTAlignmentError": 1, "UnexpectedAdmissionError": 1}
    assert {e["key"] for e in body["by_resource"]} == {"nvidia.com/gpu + cpu", "cpu", "nvidia.com/gpu",
                                                        "(none named)"}
    assert sum(e["pods"] for e in body["by_node_class"]) == 4
    assert body["remedies"]["other-node"] == 4 and body["remedies"]["setting"] == 2


def test_pages(cluster, viewer_client):
    client = viewer_client
    pod = RejectedPod.objects.get(name="train-worker-0")
    page = client.get(f"/rejected/{pod.pk}/").content.decode()
    assert "TopologyAffinityError" in page and "free only on NUMA 1" in page
    assert 'class="hints whatif-hints"' in page and 'data-kind="other-node"' in page  # hint table, remedies
    ghost = RejectedPod.objects.get(name="ghost")
    ghost_page = client.get(f"/rejected/{ghost.pk}/").content.decode()
    assert 'data-reproduced="false">not reproduced: the replay admits this pod on gpu-b now' in ghost_page
    node = Node.objects.get(cluster=cluster, name="gpu-a")
    assert 'data-rejected="ml/train-worker-0"' in client.get(f"/nodes/{node.pk}/").content.decode()
    assert 'data-rejected="ml/train-worker-0"' in client.get("/pods/?q=train").content.decode()
    view = client.get(f"/clusters/{cluster.pk}/rejected").content.decode()
    assert 'data-count="4"' in view and 'data-group="node class"' in view
    filtered = client.get(f"/clusters/{cluster.pk}/rejected?reason=SMTAlignmentError").content.decode()
    assert 'data-rejected="ml/smt"' in filtered and 'data-rejected="ml/ghost"' not in filtered


def test_import_command_and_page_report_rejected_pods(tmp_path, capsys, client):
    from django.core.management import call_command

    path = tmp_path / "snap.yaml"
    path.write_text(as_yaml(every_reason()))
    call_command("import_cluster", str(path), "--cluster", "cli")
    out = capsys.readouterr().out
    assert "rejected by the kubelet: 4 pods (4 added, 0 updated, 0 removed), 3 reproduced by the replay" in out
    with path.open("rb") as f:
        page = client.post("/clusters/import", {"cluster": "page", "file": f}).content.decode()
    assert 'data-rejected="4"' in page
