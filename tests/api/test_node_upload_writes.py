"""`POST /api/nodes/upload/`: validating the upload reads the file and writes nothing; the write happens in
`save`, all or nothing (a pod the file pins that runs on another node is a 409 and changes nothing)."""

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from numaweb.api.serializers import NodeUploadSerializer
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Node
from scheduler_core.model.topology import synthetic
from tests.web.helpers import make_node


def _topology_file() -> SimpleUploadedFile:
    return SimpleUploadedFile("node.json", json.dumps(synthetic(1, 2, 4, 1).to_dict()).encode())


def test_validation_writes_nothing_and_save_writes_the_node(cluster):
    upload = NodeUploadSerializer(data={"cluster": cluster.pk, "name": "n1", "file": _topology_file(),
                                        "topology_manager_policy": "restricted"})
    assert upload.is_valid(), upload.errors
    assert not Node.objects.exists()
    node = upload.save()
    assert Node.objects.get() == node and (node.num_cpus, node.topology_manager_policy) == (8, "restricted")


def test_validation_of_an_existing_node_leaves_it_as_it_was(cluster):
    node = make_node(cluster, "n1", shape=(2, 1, 4, 1))
    before = Node.objects.values().get(pk=node.pk)
    upload = NodeUploadSerializer(data={"cluster": cluster.pk, "name": "n1", "file": _topology_file()})
    assert upload.is_valid(), upload.errors
    assert Node.objects.values().get(pk=node.pk) == before
    upload.save()
    assert Node.objects.values().get(pk=node.pk)["generation"] == before["generation"] + 1


def test_a_pod_held_on_another_node_is_a_409_and_nothing_changes(api, cluster):
    other = make_node(cluster, "other")
    inventory.add_allocation(other, pod="uid-1", container="c", cpus="0-1")
    state = {"policyName": "static", "defaultCpuSet": "0,3-7", "checksum": 1, "entries": {"uid-1": {"c": "1-2"}}}
    rows = list(Allocation.objects.values_list("pod", "node__name", "cpus"))
    response = api.post("/api/nodes/upload/", {"cluster": cluster.pk, "name": "n2", "file": SimpleUploadedFile(
        "cpu_manager_state", json.dumps(state).encode())}, format="multipart")
    assert response.status_code == 409, response.content
    assert "a pod runs on one node" in response.json()["detail"]
    assert list(Node.objects.values_list("name", flat=True)) == ["other"]
    assert list(Allocation.objects.values_list("pod", "node__name", "cpus")) == rows


def test_settings_the_topology_cannot_take_are_a_400_on_file_and_nothing_changes(api, cluster):
    """Reserved CPUs the file's machine does not have: refused when the node is written, not before."""
    node = make_node(cluster, "n1", shape=(2, 1, 4, 1), reserved_cpus="7")
    before = Node.objects.values().get(pk=node.pk)
    small = SimpleUploadedFile("node.json", json.dumps(synthetic(1, 1, 4, 1).to_dict()).encode())
    response = api.post("/api/nodes/upload/", {"cluster": cluster.pk, "name": "n1", "file": small},
                        format="multipart")
    assert response.status_code == 400 and "7" in response.json()["file"][0], response.content
    assert Node.objects.values().get(pk=node.pk) == before
