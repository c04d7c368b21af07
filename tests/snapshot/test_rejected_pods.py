"""Pods the kubelet rejected, from a snapshot: kept as rejected (holding nothing), idempotent on
re-import, explained by the replayed admission, and given remedies the engine checked (each checked
again here: the pod admitted on the proposed node / after the moves / under the proposed setting)."""

import pytest

from numaweb.inventory import services
from numaweb.inventory.models import Allocation, Cluster, Node, RejectedPod
from numaweb.inventory.snapshot import import_snapshot
from scheduler_core.formats.snapshot import load_snapshot
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.kubelet.kubelet_start import kubelet_start, model_checkpoints
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.scheduler.rejected import as_rejected_on, with_settings

from .rejected_snapshot import AFFINITY, SMT, UNEXPECTED, as_yaml, crowded, every_reason, pod

pytestmark = pytest.mark.django_db


def _imported(items, name="prod"):
    cluster, _ = Cluster.objects.get_or_create(name=name)
    return cluster, import_snapshot(cluster, as_yaml(items))


def _engine_nodes(cluster):
    return {values[1]: node for values, node in services.engine_nodes(Node.objects.filter(cluster=cluster))}


def _pods(items):
    return {p.name: p for p in load_snapshot(as_yaml(items).encode()).rejected()}


def _verify(remedy, pod, nodes, rejected_on, reason, running=None):
    """Carry the remedy out on the engine's nodes as the import left them: the pod must be admitted."""
    detail = remedy["detail"]
    if remedy["kind"] == "other-node":
        assert detail["nodes"] and rejected_on not in detail["nodes"]
        for name in detail["nodes"]:
            assert admit_pod(nodes[name], pod, commit=False).admitted, (name, remedy)
    elif remedy["kind"] == "setting":
        node, _ = as_rejected_on(nodes[rejected_on], reason)
        changed = with_settings(node, KubeletConfig.from_dict(detail["kubelet"]))
        assert admit_pod(changed, pod, commit=False).admitted, remedy
        verdict = kubelet_start(node.topology, changed.kubelet, *model_checkpoints(node))
        assert verdict.starts == detail["starts"]
    else:
        assert remedy["kind"] == "make-room" and detail["moves"]
        work = {n: node.copy() for n, node in nodes.items()}
        for move in detail["moves"]:
            assert work[move["from_node"]].release(f"{move['namespace']}/{move['pod']}"), move
        assert admit_pod(work[detail["node"]], pod).admitted, remedy
        for move in detail["moves"]:  # each moved pod is admitted again where the plan puts it
            assert admit_pod(work[move["to_node"]], running[f"{move['namespace']}/{move['pod']}"]).admitted, move


def test_every_reason_imports_as_rejected_explained_and_remedied():
    items = every_reason()
    cluster, report = _imported(items)
    rows = {p.name: p for p in RejectedPod.objects.filter(cluster=cluster).select_related("node")}
    assert set(rows) == {"train-worker-0", "smt", "greedy", "ghost"}
    assert sorted(report["rejected_pods"]["added"]) == sorted(f"ml/{n}" for n in rows)
    assert report["rejected_pods"]["kept"] == 4 and report["rejected_pods"]["reproduced"] == 3
    # rejected pods hold nothing: only the running pods are replayed
    assert {a.pod for a in Allocation.objects.filter(cluster=cluster)} == {"ml/hog", "ml/hog-c"}
    train, smt, greedy, ghost = rows["train-worker-0"], rows["smt"], rows["greedy"], rows["ghost"]
    assert (train.reason, train.message, train.node.name) == (AFFINITY[0], AFFINITY[1], "gpu-a")
    assert (train.job, train.gang, train.rejected_at) == ("train", "train-group", "2026-11-20T11:00:02Z")
    assert (smt.reason, greedy.reason) == (SMT[0], UNEXPECTED[0])
    # each reproduced explanation names the resource and the NUMA nodes
    assert train.reproduced and train.resource == "nvidia.com/gpu + cpu"
    assert train.explanation["sentence"].startswith(
        "1 nvidia.com/gpu is free only on NUMA 1; NUMA 1 has 2 CPUs free, container app wants 4 CPUs")
    assert "single-numa-node" in train.explanation["sentence"] and train.explanation["numa"] == [0, 1]
    assert train.explanation["admission"]["error"]["reason"] == "TopologyAffinityError"
    assert train.explanation["admission"]["decisions"][0]["hints"]["nvidia.com/gpu"]  # the hint table's rows
    assert smt.reproduced and smt.resource == "cpu" and "full-pcpus-only" in smt.explanation["sentence"]
    assert "NUMA 0 has 6 free CPUs on whole cores, NUMA 1 has 2" in smt.explanation["sentence"]
    assert greedy.reproduced and greedy.resource == "nvidia.com/gpu"
    assert "wants 2 nvidia.com/gpu; NUMA 0 has 0 nvidia.com/gpu free, NUMA 1 has 1" in greedy.explanation["sentence"]
    # a rejection the replay cannot reproduce says so, and invents no reason
    assert not ghost.reproduced and ghost.explanation["sentence"].startswith(
        "not reproduced: the replay admits this pod on gpu-b now")
    assert ghost.explanation["replay_reason"] is None
    # remedies: every one carried out again on the engine's nodes admits the pod; cheapest first
    nodes, pods = _engine_nodes(cluster), _pods(items)
    kinds = set()
    for name, row in rows.items():
        costs = [(not r["viable"], *r["cost"]) for r in row.remedies]
        assert costs == sorted(costs)
        for remedy in row.remedies:
            kinds.add(remedy["kind"])
            _verify(remedy, pods[name].pod, nodes, row.node.name, row.reason)
    assert kinds == {"other-node", "setting"}
    assert rows["train-worker-0"].remedies[0]["detail"]["nodes"] == ["gpu-b", "gpu-c"]
    assert any(r["detail"].get("change") == "cpuManagerPolicyOptions: full-pcpus-only removed" for r in smt.remedies)
    assert not any(r["kind"] == "setting" for r in ghost.remedies)  # its node admits it as it is


def test_reimport_is_idempotent_and_a_gone_pod_is_removed():
    items = every_reason()
    cluster, _ = _imported(items)
    before = {r.pk: (r.explanation, r.remedies) for r in RejectedPod.objects.filter(cluster=cluster)}
    generations = dict(Node.objects.filter(cluster=cluster).values_list("name", "generation"))
    report = import_snapshot(cluster, as_yaml(items))
    assert report["changed"] is False
    assert report["rejected_pods"]["added"] == report["rejected_pods"]["updated"] == []
    assert {r.pk: (r.explanation, r.remedies) for r in RejectedPod.objects.filter(cluster=cluster)} == before
    assert dict(Node.objects.filter(cluster=cluster).values_list("name", "generation")) == generations
    report = import_snapshot(cluster, as_yaml([i for i in items if i["metadata"]["name"] != "ghost"]))
    assert report["rejected_pods"]["removed"] == ["ml/ghost"] and report["changed"]
    assert not RejectedPod.objects.filter(cluster=cluster, name="ghost").exists()
    # hog no longer runs: gpu-a changed, so its rejections are replayed again and no longer reproduce
    report = import_snapshot(cluster, as_yaml([i for i in items if i["metadata"]["name"] not in ("ghost", "hog")]))
    assert "ml/train-worker-0" in report["rejected_pods"]["updated"]
    train = RejectedPod.objects.get(cluster=cluster, name="train-worker-0")
    assert not train.reproduced and train.explanation["sentence"].startswith("not reproduced: the replay admits")


def test_a_session_allocation_makes_the_remedies_computed_again():
    items = every_reason()
    cluster, _ = _imported(items)
    node = Node.objects.get(cluster=cluster, name="gpu-b")
    before = RejectedPod.objects.get(cluster=cluster, name="train-worker-0").remedies[0]["detail"]["nodes"]
    assert before == ["gpu-b", "gpu-c"]
    # a session's pod now holds gpu-b's NUMA 1 (its CPUs and both GPUs): it stays, and gpu-b no longer admits
    Allocation.objects.create(node=node, pod="ml/other", cpus="8-15",
                              devices={"nvidia.com/gpu": ["gpu-node-1-0", "gpu-node-1-1"]})
    report = import_snapshot(cluster, as_yaml(items))
    assert report["scheduled_dropped"] == [] and "ml/train-worker-0" in report["rejected_pods"]["updated"]
    train = RejectedPod.objects.get(cluster=cluster, name="train-worker-0")
    assert train.remedies[0]["kind"] == "other-node" and train.remedies[0]["detail"]["nodes"] == ["gpu-c"]


def test_dry_run_keeps_nothing():
    cluster = Cluster.objects.create(name="dry")
    report = import_snapshot(cluster, as_yaml(every_reason()), dry_run=True)
    assert len(report["rejected_pods"]["added"]) == 4
    assert not RejectedPod.objects.exists()


def test_make_room_remedy_when_no_node_admits_now():
    items = crowded()
    cluster, _ = _imported(items, "crowded")
    row = RejectedPod.objects.get(cluster=cluster, name="wide")
    assert row.reproduced and row.resource == "cpu"
    assert "NUMA" in row.explanation["sentence"] and "wants 3 CPUs" in row.explanation["sentence"]
    kinds = [r["kind"] for r in row.remedies]
    assert "other-node" not in kinds and "make-room" in kinds and "setting" in kinds
    room = next(r for r in row.remedies if r["kind"] == "make-room")
    assert room["cost"][0] == len(room["detail"]["moves"]) == 1
    nodes, pods = _engine_nodes(cluster), _pods(items)
    running = {f"{p.namespace}/{p.name}": p.pod for p in load_snapshot(as_yaml(items).encode()).pods
               if p.phase == "Running"}
    for remedy in row.remedies:
        _verify(remedy, pods["wide"].pod, nodes, "full-a", row.reason, running)



def test_only_kubelet_admission_rejections_on_listed_nodes_are_kept():
    items = every_reason()
    evicted = pod("evicted", "gpu-a", 2, created=6, rejected=("Evicted", "The node was low on resource: memory."))
    elsewhere = pod("elsewhere", "gone-node", 2, created=7, rejected=AFFINITY)
    snap = load_snapshot(as_yaml([*items, evicted, elsewhere]).encode())
    # by node, then namespace/name; the evicted pod and the one on an unlisted node are not kept
    assert [(p.node, p.name) for p in snap.rejected()] == [
        ("gpu-a", "smt"), ("gpu-a", "train-worker-0"), ("gpu-b", "ghost"), ("gpu-c", "greedy")]
    by_name = {p.name: p for p in snap.pods}
    assert not by_name["evicted"].rejected and by_name["elsewhere"].rejected  # its node is not listed
    assert by_name["train-worker-0"].message == AFFINITY[1] and by_name["smt"].gang is None
