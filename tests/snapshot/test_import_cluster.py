"""Cluster snapshot import (`import_cluster`): the upstream example objects, re-import, a newer
snapshot, hostile input, and the replayed allocations a session then schedules around."""

import copy
import pathlib

import pytest
import yaml
from django.core.management import CommandError, call_command

from numaweb.inventory import services
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs.models import Job
from scheduler_core.model.cpuset import CPUSet

DATA = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data" / "snapshot"
UPSTREAM = DATA / "upstream-examples.yaml"


def _import(path, cluster="prod", capsys=None, *flags):
    call_command("import_cluster", str(path), "--cluster", cluster, *flags)
    return capsys.readouterr().out if capsys else None


def test_upstream_examples_import(db, capsys):
    out = _import(UPSTREAM, capsys=capsys)
    cluster = Cluster.objects.get(name="prod")
    assert cluster.source == "kubectl-snapshot" and cluster.imported_at is not None
    nodes = {n.name: n for n in cluster.nodes.all()}
    assert set(nodes) == {"node1", "worker-node-a", "node5"}
    node1, node5, worker = nodes["node1"], nodes["node5"], nodes["worker-node-a"]
    # NRT v1alpha1 counts: CPU ids dealt out per zone and flagged inferred
    assert (node1.num_cpus, node1.num_numa_nodes, node1.source_format) == (110, 4, "nrt")
    assert node1.topology_manager_policy == "single-numa-node" and node1.reserved_cpus == "0-4,20-24,50-54,80-84"
    assert "cpus" in node1.snapshot["inferred"] and node1.labels["kubernetes.io/hostname"] == "node1"
    # Numatopology + NRT v1alpha2: CPUs from cpuDetail, memory and policy attributes from the NRT
    assert (node5.source_format, node5.num_cpus, node5.num_sockets) == ("numatopo+nrt", 16, 8)
    assert node5.from_numatopology and not node1.from_numatopology
    assert node5.numatopology and not node1.numatopology  # what Volcano's plugin can see
    assert node5.topology_manager_policy == "best-effort" and node5.cpu_manager_policy == "none"
    assert node5.topology["numa_nodes"][0]["memory"] == 34359738368
    assert worker.topology_manager_scope == "container" and worker.reserved_cpus == "0,4"
    # running pods replayed in creation order: cache (2019-11-19) first, then the two train workers
    replayed = list(Allocation.objects.filter(node=node1).order_by("id"))
    assert {a.origin for a in replayed} == {"replayed"}
    by_pod = {(a.pod, a.container): a for a in replayed}
    assert set(by_pod) == {("default/cache", "redis"), ("ml/train-worker-0", "worker"),
                           ("ml/train-worker-1", "worker")}
    # cache: its init container's 2 CPUs go back to redis (reuse), so NUMA 0 keeps 11 of its 15
    assert by_pod[("default/cache", "redis")].cpus == "5-8"
    assert by_pod[("ml/train-worker-0", "worker")].cpus == "9-18"    # fits NUMA 0 (lowest) exactly
    worker1 = by_pod[("ml/train-worker-1", "worker")]                # vendor/nic2 exists on NUMA 1 only
    assert (worker1.cpus, worker1.devices) == ("25-34", {"vendor/nic2": ["nic2-node-1-0"]})
    assert not Allocation.objects.filter(node=worker).exists()      # Burstable: no exclusive CPUs
    # NRT's availability checked against the replay: reported, not hidden
    report = cluster.last_import
    assert report["allocations_replayed"] == 3
    assert any(d.startswith("node1: NUMA 0: the NodeResourceTopology says 10 CPUs available, the replay leaves 1")
               for d in report["disagreements"]), report["disagreements"]
    assert "disagreement: node1: NUMA 0" in out
    # pending work: the Pending Volcano Job with its PodGroup's minMember, and the pending pod
    jobs = {(j.namespace, j.name): j for j in Job.objects.all()}
    assert set(jobs) == {("ml", "numa-job"), ("default", "lonely")}
    assert jobs[("ml", "numa-job")].min_available == 3 and jobs[("ml", "numa-job")].source_format == "snapshot"
    assert {t.name: t.topology_policy for t in jobs[("ml", "numa-job")].tasks.all()} == {
        "ps": "single-numa-node", "worker": "single-numa-node"}


def test_reimport_changes_nothing(db, capsys):
    _import(UPSTREAM)
    before = {n.name: (n.generation, n.imported_at) for n in Node.objects.all()}
    allocs = list(Allocation.objects.values_list("id", "cpus"))
    jobs = list(Job.objects.values_list("id", "name"))
    out = _import(UPSTREAM, capsys=capsys)
    assert "nothing changed" in out
    assert {n.name: (n.generation, n.imported_at) for n in Node.objects.all()} == before
    assert list(Allocation.objects.values_list("id", "cpus")) == allocs
    assert list(Job.objects.values_list("id", "name")) == jobs


def _newer(tmp_path) -> pathlib.Path:
    """The same cluster later: node5 gone, a new node, node1's policy changed, one pod finished."""
    doc = yaml.safe_load(UPSTREAM.read_text())
    items = [i for i in doc["items"] if i["metadata"]["name"] != "node5"]
    for item in items:
        if item["kind"] == "NodeResourceTopology" and item["metadata"]["name"] == "node1":
            item["topologyPolicies"] = ["BestEffort"]
        if item["kind"] == "Pod" and item["metadata"]["name"] == "train-worker-1":
            item["status"]["phase"] = "Succeeded"
    for item in list(items):
        if item["metadata"]["name"] == "worker-node-a" and item["kind"] in ("Node", "NodeResourceTopology"):
            twin = copy.deepcopy(item)
            twin["metadata"]["name"] = "worker-node-b"
            items.append(twin)
    doc["items"] = items
    path = tmp_path / "newer.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_newer_snapshot_updates_adds_and_flags_removed(db, tmp_path, capsys):
    _import(UPSTREAM)
    gen = {n.name: n.generation for n in Node.objects.all()}
    out = _import(_newer(tmp_path), "prod", capsys, "--prune")
    nodes = {n.name: n for n in Node.objects.all()}
    assert nodes["node1"].topology_manager_policy == "best-effort"
    assert nodes["node1"].generation > gen["node1"]
    assert nodes["worker-node-a"].generation == gen["worker-node-a"]
    assert nodes["node5"].removed_at is not None and nodes["worker-node-b"].removed_at is None
    report = Cluster.objects.get(name="prod").last_import
    assert report["nodes_added"] == ["worker-node-b"] and report["nodes_removed"] == ["node5"]
    assert set(report["nodes_updated"]["node1"]) >= {"kubelet", "allocations"}
    assert "updated node1: " in out and "removed (flagged): node5" in out
    assert not Allocation.objects.filter(pod="ml/train-worker-1").exists()
    # the removed node comes back with the first snapshot
    _import(UPSTREAM)
    node5 = Node.objects.get(name="node5")
    assert node5.removed_at is None
    assert Cluster.objects.get(name="prod").last_import["nodes_returned"] == ["node5"]


def test_removed_nodes_are_left_out_of_sessions(db, tmp_path):
    from numaweb.inventory.services import cluster_nodes

    _import(UPSTREAM)
    _import(_newer(tmp_path), "prod", None, "--prune")
    nodes, _ = cluster_nodes(Cluster.objects.get(name="prod"))
    assert {n.name for n in nodes} == {"node1", "worker-node-a", "worker-node-b"}


@pytest.mark.parametrize("text, message", [
    ("kind: List\nitems: [1, 2]\n", "item 0 is not an object"),
    ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n", "YAML bomb"),
    ("{\"kind\": \"List\", \"items\": [{\"kind\": \"NodeResourceTopology\", \"metadata\": {\"name\": \"n\"}, "
     "\"zones\": [{\"name\": \"node-0\", \"type\": \"Node\", \"resources\": [{\"name\": \"cpu\", "
     "\"capacity\": \"-3\"}]}]}]}", "node n"),
])
def test_hostile_or_bad_snapshot_writes_nothing(db, tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CommandError, match=message):
        call_command("import_cluster", str(path), "--cluster", "bad")
    assert not Cluster.objects.filter(name="bad").exists()
    assert not Node.objects.exists() and not Job.objects.exists()


def test_replayed_cpus_are_what_the_engine_gives(db):
    """The replay is the engine's admission, not a rule of the importer: the same pods admitted on
    the same engine node give the same CPUs."""
    from scheduler_core.formats.snapshot import load_snapshot
    from scheduler_core.kubelet.state_check import replay
    from scheduler_core.model.node import Node as EngineNode

    _import(UPSTREAM)
    snap = load_snapshot(UPSTREAM)
    node = snap.nodes["node1"]
    engine = EngineNode("node1", node.topology, node.kubelet)
    replay(engine, [p.pod for p in snap.running_on("node1")])
    stored = CPUSet()
    for a in Allocation.objects.filter(node__name="node1"):
        stored |= CPUSet.parse(a.cpus)
    assert CPUSet(node.topology.all_cpus & ~engine.free_cpus & ~engine.reserved_cpus.mask) == stored


def test_a_pod_moving_off_a_removed_node_and_a_scheduled_pod_now_running(db, tmp_path, capsys):
    """One holder per pod container in a cluster: the replayed pod of a node that left the snapshot is
    released before it is replayed elsewhere, and a session's allocation for a pod the snapshot shows
    running gives way to the replay."""
    _import(UPSTREAM)
    node5 = Node.objects.get(name="node5")
    services.add_allocation(Node.objects.get(name="worker-node-a"), pod="default/lonely", container="app",
                            cpus="1-2", origin="scheduled")
    doc = yaml.safe_load(UPSTREAM.read_text())
    items = [i for i in doc["items"] if i["metadata"]["name"] != "node1"]
    for item in items:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "cache":
            item["spec"]["nodeName"] = "worker-node-a"
            item["spec"]["initContainers"] = []
            item["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"
        if item["kind"] == "Pod" and item["metadata"]["name"] == "lonely":
            item["spec"]["nodeName"] = "worker-node-a"
            item["status"]["phase"] = "Running"
    doc["items"] = items
    path = tmp_path / "moved.yaml"
    path.write_text(yaml.safe_dump(doc))
    _import(path, "prod", None, "--prune")
    report = Cluster.objects.get(name="prod").last_import
    assert report["nodes_removed"] == ["node1"]
    assert any("default/lonely/app (now running" in d for d in report["scheduled_dropped"])
    held = {(a.pod, a.container): (a.node.name, a.origin) for a in Allocation.objects.select_related("node")}
    assert held[("default/cache", "redis")] == ("worker-node-a", "replayed")
    assert held[("default/lonely", "app")] == ("worker-node-a", "replayed")
    assert not Allocation.objects.filter(node__name="node1").exists()
    assert Node.objects.get(pk=node5.pk).removed_at is None
