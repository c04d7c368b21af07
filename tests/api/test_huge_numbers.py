"""A 5,000-digit integer in any uploaded YAML or JSON, and JSON nested 100,000 deep in a form field, answer 400
naming the field (issue 37 rows 10 and 12): Python refuses to read integers of more than 4,300 digits with a
ValueError, and json.loads recurses once per level; both were 500s."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from numaweb.inventory.models import Cluster
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db

BIG = "9" * 5000
DIGITS = "a number has more than 4300 digits"
DEEP = "[" * 100_000 + "]" * 100_000


def manifest_yaml(value: str) -> str:
    return ("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: big\n"
            f"spec:\n  minAvailable: {value}\n  tasks:\n    - replicas: 1\n      name: t\n      template:\n"
            "        spec:\n          containers:\n            - name: c\n              resources:\n"
            "                requests: {cpu: 1}\n")


def manifest_json(value: str) -> str:
    return ('{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "big"}, '
            f'"spec": {{"minAvailable": {value}, "tasks": [{{"replicas": 1, "name": "t", "template": {{"spec": '
            '{"containers": [{"name": "c", "resources": {"requests": {"cpu": 1}}}]}}}]}}')


@pytest.fixture
def node():
    return make_node(Cluster.objects.create(name="c1"), "n1")


def _file(text: str, name: str = "f.json") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode())


def _refused(response, field: str, words: str = DIGITS) -> None:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    body = response.json()
    assert field in body and words in " ".join(map(str, body[field])), body


@pytest.mark.parametrize("manifest", [manifest_yaml(BIG), manifest_json(BIG)], ids=["yaml", "json"])
def test_manifests(api, node, manifest):
    _refused(api.post("/api/jobs/", {"cluster": node.cluster_id, "manifest": manifest}, format="json"), "manifest")


def test_node_uploads(api, node):
    engine = json.dumps({"name": "n2", "topology": {"cpus": 1}}).replace("1}", BIG + "}")
    _refused(api.post("/api/nodes/upload/", {"cluster": node.cluster_id, "name": "n2", "file": _file(engine)},
                      format="multipart"), "file")


def test_state_files(api, node):
    state = '{"policyName": "static", "defaultCpuSet": "0-3", "checksum": %s}'.replace("%s", BIG)
    _refused(api.post(f"/api/nodes/{node.pk}/check-state/", {"cpu_state": _file(state)}, format="multipart"),
             "cpu_state")


def test_snapshot_imports(api, node):
    snapshot = '{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1", ' \
               '"generation": %s}}]}'.replace("%s", BIG)
    _refused(api.post(f"/api/clusters/{node.cluster_id}/import/", {"file": _file(snapshot)}, format="multipart"),
             "file")


def test_kubelet_configs(api, node):
    config = f"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuCFSQuotaPeriod: {BIG}\n"
    _refused(api.post(f"/api/nodes/{node.pk}/kubelet-config/", {"file": _file(config, "config.yaml")},
                      format="multipart"), "file")


def test_json_inside_a_multipart_upload_deep_or_huge(api, node):
    state = _file('{"policyName": "none", "defaultCpuSet": "", "checksum": 1}')
    for planned, words in ((DEEP, "nested deeper than 64 levels (NUMAWEB_MAX_JSON_DEPTH)"),
                           ('{"reserved_cpus": %s}'.replace("%s", BIG), DIGITS)):
        state.seek(0)
        _refused(api.post(f"/api/nodes/{node.pk}/check-state/", {"cpu_state": state, "planned_settings": planned},
                          format="multipart"), "planned_settings", words)
    _refused(api.post("/api/comparisons/", {"cluster": node.cluster_id, "variants": DEEP}, format="multipart"),
             "variants", "nested deeper than 64 levels")


def test_pages(client, node):
    page = client.post("/jobs/", {"cluster": node.cluster_id, "manifest": manifest_yaml(BIG)})
    assert page.status_code == 422 and DIGITS in page.content.decode()  # the job form's status for its errors
    page = client.post(f"/nodes/{node.pk}/check-state", {
        "cpu_state": _file('{"policyName": "none", "defaultCpuSet": "", "checksum": 1}'), "reserved_memory": DEEP})
    assert page.status_code == 400 and "nested deeper than 64 levels" in page.content.decode()
    page = client.post(f"/nodes/{node.pk}/check-state", {
        "cpu_state": _file('{"policyName": "none", "checksum": %s}'.replace("%s", BIG))})
    assert page.status_code == 400 and DIGITS in page.content.decode()
    page = client.post("/clusters/import", {"cluster": "c1", "file": _file('{"items": [%s]}'.replace("%s", BIG))})
    assert page.status_code == 400 and DIGITS in page.content.decode()
