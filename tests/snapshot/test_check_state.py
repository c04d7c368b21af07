"""The kubelet model checked against real state files: seed 001's cpu_manager_state, the
Kubernetes examples, an altered file, memory state, pods in admission order; engine and command."""

import json
import pathlib

import pytest
from django.core.management import CommandError, call_command

from numaweb.inventory import services
from numaweb.inventory.models import Cluster
from scheduler_core.formats import load
from scheduler_core.kubelet.state_check import check_state
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.topology import Topology

DATA = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data"
SEED_STATE = (DATA / "seeds" / "seed001-cpu_manager_state.json").read_text()
SEED_LSCPU = DATA / "seeds" / "seed001-lscpu.txt"
ALTERED = SEED_STATE.replace('"16-24"', '"17-25"').replace("0,10-15,25-31", "0,10-16,26-31")


def seed_node(policy="single-numa-node", memory: int = 0, **kw) -> Node:
    """Seed 001's node-1: 2 NUMA nodes × 16 CPUs, single-numa-node, CPU 0 reserved (it is in the
    file's defaultCpuSet: reserved CPUs stay in the shared pool); `memory` bytes per NUMA node."""
    topology = load(SEED_LSCPU).topology
    if memory:
        data = topology.to_dict()
        for n in data["numa_nodes"]:
            n["memory"] = memory
        topology = Topology.from_dict(data)
    return Node("node-1", topology,
                KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy, reserved_cpus="0", **kw))


@pytest.mark.parametrize("policy", ["single-numa-node", "best-effort", "restricted"])
def test_seed_example_every_container_matches(policy):
    result = check_state(seed_node(policy), SEED_STATE)
    assert [(c.pod[:8], str(c.predicted_cpus), str(c.actual_cpus)) for c in result.containers] == [
        ("fb15e10a", "1-9", "1-9"), ("777870b5", "16-24", "16-24")]
    assert all(c.match for c in result.containers) and not result.reasons
    assert result.verdict == "all 2 containers match"
    assert str(result.predicted_default) == "0,10-15,25-31" == str(result.actual_default)


def test_altered_state_file_mismatch_is_found_and_explained():
    result = check_state(seed_node(), ALTERED)
    bad = result.mismatches
    assert [(c.pod[:8], str(c.predicted_cpus), str(c.actual_cpus)) for c in bad] == [("777870b5", "16-24", "17-25")]
    assert bad[0].why == "same NUMA nodes (1), other CPUs: 25 instead of 16"
    assert result.verdict.startswith("1 of 2 containers do not match")
    assert result.to_dict()["mismatches"] == 1


def test_written_under_another_policy_option():
    """Replayed without a Topology Manager policy, the second container spans both NUMA nodes; the
    file was written under single-numa-node (or best-effort...): the check says so."""
    result = check_state(seed_node("none"), SEED_STATE)
    assert [str(c.predicted_cpus) for c in result.mismatches] == ["10-18"]
    assert result.mismatches[0].why == "actual CPUs on NUMA 1, predicted on NUMA 0,1"
    reason = next(r for r in result.reasons if "another policy option" in r)
    assert "with topology manager policy single-numa-node" in reason


def test_other_cpu_manager_policy_and_foreign_cpus():
    state = json.dumps({"policyName": "none", "defaultCpuSet": "0-63"})
    result = check_state(seed_node(), state)
    assert any("written by the none CPU Manager policy" in r for r in result.reasons)
    assert any("CPUs 32-63 are not on this node's topology" in r for r in result.reasons)


def test_kubernetes_blog_example_static_without_entries():
    """The Kubernetes blog's 64-CPU node: static policy, no exclusive CPUs yet, the shared pool is all."""
    node = Node("blog", load("pack:2 numa:1 core:16 pu:2", "synthetic").topology,
                KubeletConfig(cpu_manager_policy="static", reserved_cpus="0"))
    result = check_state(node, (DATA / "k8s/kubelet/k8s-blog-cpu_manager_state-64cpu-default.json").read_text())
    assert result.containers == [] and result.verdict == "all 0 containers match"


def test_kubernetes_v1_layout_is_checked_by_container_id():
    node = Node("k", load("pack:1 core:8 pu:1", "synthetic").topology, KubeletConfig(cpu_manager_policy="none"))
    state = DATA / "k8s/kubelet/k8s-test-cpu_manager_state-v1-containerid-entries.json"
    result = check_state(node, state.read_text())
    assert {c.container for c in result.containers} == {"containerID1", "containerID2"}
    assert any("the node's CPU Manager policy is none" in r for r in result.reasons)


def test_memory_state_blocks_compared():
    memory = json.dumps({
        "policyName": "Static",
        "machineState": {"0": {"memoryMap": {"memory": {"total": 64 << 30}}},
                         "1": {"memoryMap": {"memory": {"total": 64 << 30}}}},
        "entries": {"fb15e10a-b6a5-4aaa-8fcd-76c1aa64e6fd": {"container-1": [
                        {"numaAffinity": [0], "type": "memory", "size": 2 << 30}]},
                    "777870b5-c64f-42f5-9296-688b9dc212ba": {"container-1": [
                        {"numaAffinity": [1], "type": "memory", "size": 2 << 30}]}}})
    node = seed_node(memory=64 << 30, memory_manager_policy="Static", reserved_memory={0: {"memory": 1 << 30}})
    result = check_state(node, SEED_STATE, memory)
    assert all(c.match for c in result.containers), [c.to_dict() for c in result.containers]
    assert result.containers[1].predicted_memory == {1: {"memory": 2 << 30}}
    wrong = memory.replace('"numaAffinity": [1]', '"numaAffinity": [0]')
    bad = check_state(node, SEED_STATE, wrong).mismatches
    assert [c.pod[:8] for c in bad] == ["777870b5"] and bad[0].why == "memory blocks differ"


PODS = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: b, namespace: default, uid: 777870b5-c64f-42f5-9296-688b9dc212ba}
  spec:
    containers:
    - name: container-1
      resources: {limits: {cpu: "9", memory: 1Gi}}
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: default, uid: fb15e10a-b6a5-4aaa-8fcd-76c1aa64e6fd}
  spec:
    containers:
    - name: container-1
      resources: {limits: {cpu: "9", memory: 1Gi}}
"""


def test_pods_in_admission_order_change_the_prediction():
    """Given in the other order, the first pod takes NUMA 0's CPUs: the model then disagrees with
    both entries, which is what an operator needs to see."""
    from scheduler_core.formats.snapshot import load_pods

    result = check_state(seed_node(), SEED_STATE, pods=load_pods(PODS.encode()))
    assert result.order == "pods as given"
    assert [(c.pod[:8], str(c.predicted_cpus)) for c in result.containers] == [("777870b5", "1-9"),
                                                                                ("fb15e10a", "16-24")]
    assert len(result.mismatches) == 2


# -- the command ------------------------------------------------------------------------------------
@pytest.fixture
def seed_row(db):
    cluster = Cluster.objects.create(name="seed")
    return services.import_node(cluster, "node-1", SEED_LSCPU.read_bytes(), None,
                                {"topology_manager_policy": "single-numa-node", "reserved_cpus": "0"})


def test_command_on_the_seed_example(seed_row, capsys):
    call_command("check_state", "node-1", str(DATA / "seeds" / "seed001-cpu_manager_state.json"))
    out = capsys.readouterr().out
    assert "ok       fb15e10a-b6a5-4aaa-8fcd-76c1aa64e6fd/container-1: predicted 1-9, actual 1-9" in out
    assert "verdict: all 2 containers match" in out


def test_command_on_an_altered_file_exits_3(seed_row, tmp_path, capsys):
    path = tmp_path / "cpu_manager_state"
    path.write_text(ALTERED)
    with pytest.raises(SystemExit) as exc:
        call_command("check_state", "node-1", str(path))
    assert exc.value.code == 3
    out = capsys.readouterr().out
    assert "MISMATCH 777870b5-c64f-42f5-9296-688b9dc212ba/container-1: predicted 16-24, actual 17-25" in out


def test_command_bad_input(seed_row, tmp_path):
    path = tmp_path / "state"
    path.write_text("{not json")
    with pytest.raises(CommandError, match="invalid JSON"):
        call_command("check_state", "node-1", str(path))
    with pytest.raises(CommandError, match="not found"):
        call_command("check_state", "nope", str(path))
