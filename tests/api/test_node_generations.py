"""Every kind of node change advances the node's generation (what a session's commit checks), and the rule
has one owner: `numaweb/inventory/models.py` (Node.save, Node.objects...advance(), the allocation signals).
No other module writes the generation."""

import ast
import json
import pathlib

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from numaweb.inventory import kubelet_config
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs import lifecycle
from numaweb.scheduling import services as scheduling
from tests.web.helpers import make_job, make_node

ROOT = pathlib.Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "formats" / "data" / "snapshot" / "upstream-examples.yaml"
KUBELET_CONFIG = b"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
topologyManagerPolicy: restricted
"""


def _generation(node: Node) -> int:
    return Node.objects.values_list("generation", flat=True).get(pk=node.pk)


def _held(node: Node, pod: str = "default/held", cpus: str = "0-1") -> Allocation:
    return inventory.add_allocation(node, pod=pod, container="c", cpus=cpus)


def _admin_edit(client, node: Node) -> None:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(user)
    form = {"cluster": node.cluster_id, "name": node.name, "topology": json.dumps(node.topology),
            "cpu_manager_policy": "static", "cpu_manager_options": "{}", "reserved_cpus": "", "reserved_cpu_milli": "0",
            "topology_manager_policy": "restricted", "topology_manager_scope": "container",
            "topology_manager_options": "{}", "memory_manager_policy": "None", "reserved_memory": "{}",
            "numatopology": "on"}
    response = client.post(f"/admin/inventory/node/{node.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[-1500:]


def _admin_allocation(client, node: Node) -> None:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(user)
    form = {"node": node.pk, "pod": "default/admin", "container": "c", "cpus": "2-3", "memory": "{}",
            "devices": "{}", "origin": "scheduled"}
    response = client.post("/admin/inventory/allocation/add/", form)
    assert response.status_code == 302, response.content.decode()[-1500:]


def _api_patch(api, node: Node) -> None:
    response = api.patch(f"/api/nodes/{node.pk}/", {"topology_manager_scope": "pod"}, format="json")
    assert response.status_code == 200, response.content


def _committed_session(node: Node) -> None:
    job = make_job("placed", cpus="2", cluster=node.cluster)
    session = scheduling.start_session(node.cluster, "volcano", False, [job])
    scheduling.execute_session(session.pk)
    assert Allocation.objects.filter(node=node, job=job).exists()


CHANGES = {
    # the node's row saved
    "API PATCH": lambda node, api, client: _api_patch(api, node),
    "admin edit": lambda node, api, client: _admin_edit(client, node),
    "kubelet config file": lambda node, api, client: kubelet_config.apply(node, KUBELET_CONFIG),
    "topology file imported again": lambda node, api, client: inventory.import_node(node.cluster, node.name,
                                                                                    node.topology),
    "save() of some fields": lambda node, api, client: Node.objects.get(pk=node.pk).save(update_fields=["labels"]),
    # one allocation written or removed
    "allocation added": lambda node, api, client: _held(node),
    "allocation removed": lambda node, api, client: inventory.remove_allocation(_held(node)),
    "allocation through the admin": lambda node, api, client: _admin_allocation(client, node),
    # bulk writers
    "session commit": lambda node, api, client: _committed_session(node),
    "job finished": lambda node, api, client: lifecycle.finish_job(_held(node, "default/j-t-0").job),
    "job deleted": lambda node, api, client: lifecycle.delete_job(_held(node, "default/j-t-0").job),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_kind_of_node_change_advances_the_generation(api, client, cluster, change):
    node = make_node(cluster, "n1", shape=(1, 1, 8, 1))
    if change.startswith("job"):
        make_job("j", cpus="2", cluster=cluster)  # the pod default/j-t-0 is this job's
    before = _generation(node)
    if change in ("allocation removed", "job finished", "job deleted"):
        before += 1  # the allocation the change then removes was written first
    CHANGES[change](node, api, client)
    assert _generation(node) > before, change


def test_a_snapshot_advances_the_nodes_it_changes_or_prunes_and_no_other(db, tmp_path):
    call_command("import_cluster", str(SNAPSHOT), "--cluster", "prod")
    before = dict(Node.objects.values_list("name", "generation"))
    doc = yaml.safe_load(SNAPSHOT.read_text())
    doc["items"] = [i for i in doc["items"] if i["metadata"]["name"] != "node5"]  # node5 no longer listed
    for item in doc["items"]:
        if item["kind"] == "NodeResourceTopology" and item["metadata"]["name"] == "node1":
            item["topologyPolicies"] = ["BestEffort"]  # node1 changed
    newer = tmp_path / "newer.yaml"
    newer.write_text(yaml.safe_dump(doc))
    call_command("import_cluster", str(newer), "--cluster", "prod", "--prune")
    after = dict(Node.objects.values_list("name", "generation"))
    assert after["node1"] > before["node1"] and after["node5"] > before["node5"]
    assert after["worker-node-a"] == before["worker-node-a"]
    assert Node.objects.get(name="node5").removed_at is not None


def test_a_saved_node_reads_its_new_generation_and_a_new_node_starts_at_one(cluster):
    node = make_node(cluster, "n1")
    assert node.generation == 1
    node.labels = {"zone": "a"}
    node.save()
    assert node.generation == 2 == _generation(node)  # read back from the row when next used
    copy = Node.objects.get(pk=node.pk)
    copy.save()
    assert copy.generation == 3 and Cluster.objects.get().nodes.get().generation == 3


def _generation_writes(source: str) -> list[int]:
    """Lines of `source` that write a generation: `F("generation")`, `x.generation = ...` (or `+=`), and
    `generation=` given to a queryset's `update`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == "F" and any(isinstance(a, ast.Constant) and a.value == "generation" for a in node.args):
                lines.append(node.lineno)
            if name == "update" and any(k.arg == "generation" for k in node.keywords):
                lines.append(node.lineno)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign | ast.AnnAssign) else []
        if any(isinstance(t, ast.Attribute) and t.attr == "generation" for t in targets):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_only_the_inventory_models_write_a_generation():
    """The rule's one owner: elsewhere, a change goes through Node.save or Node.objects...advance()."""
    owner = ROOT / "numaweb" / "inventory" / "models.py"
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "numaweb").rglob("*.py"))
             if path != owner and "migrations" not in path.parts
             for line in _generation_writes(path.read_text())]
    assert not found, found
    assert len(_generation_writes(owner.read_text())) == 2  # advance() and save()
    # the check sees each way of writing one
    assert _generation_writes('Node.objects.update(generation=2)\nNode.objects.filter(generation=2)') == [1]
    assert _generation_writes('Node.objects.filter(pk=1).update(generation=F("generation") + 1)') == [1]
    assert _generation_writes("node.generation = 3\nnode.generation += 1\nx = node.generation") == [1, 2]


def test_a_reader_never_gets_allocations_older_than_the_generation_it_returns(db):
    """A write landing between engine_nodes' two reads (the nodes' rows, their allocations) either shows in the
    allocations returned or leaves the returned generation behind the node's: a session planning on them then
    fails its commit (StaleNodes) instead of placing pods on CPUs someone took meanwhile. Reading the allocations
    first, two concurrent sessions once held the same CPUs."""
    cluster = Cluster.objects.create(name="order")
    node = make_node(cluster, "n0")
    reads: list[str] = []

    def write_between(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("SELECT"):
            if 'FROM "inventory_allocation"' in sql:
                reads.append("allocations")
            elif '"generation"' in sql and 'FROM "inventory_node"' in sql:
                reads.append("nodes")
            if len(reads) == 2 and "written" not in reads:
                reads.append("written")  # the second read comes after a writer's commit
                inventory.add_allocation(Node.objects.get(pk=node.pk), pod="default/late", container="c", cpus="2")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(write_between):
        [((_pk, _name, generation), engine)] = list(inventory.engine_nodes(Node.objects.filter(pk=node.pk)))
    assert "written" in reads
    holds_late = any(a.pod == "default/late" for a in engine.allocations)
    assert holds_late or generation < _generation(node)
