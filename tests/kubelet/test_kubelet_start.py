"""The kubelet's start-up (kubelet_start): the verdict for a machine, a configuration and checkpoints
written the way the kubelet writes them — the refusals operators meet after changing a setting, and
the starts that carry the checkpoint's shared pool and assignments."""

import dataclasses
import json

import pytest

from scheduler_core.errors import FormatError
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.kubelet.kubelet_start import (
    CPU_STATE_FILE,
    MEMORY_STATE_FILE,
    StartVerdict,
    changed_settings,
    kubelet_start,
    model_checkpoints,
)
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import synthetic

GIB = 1 << 30
TOPO = synthetic(1, 2, 4, 2, memory_per_numa=16 * GIB)  # 2 NUMA nodes x 4 cores x 2 threads: CPUs 0-15


def _node(config: KubeletConfig, pods: int = 2, cpus: int = 2) -> Node:
    node = Node("n1", TOPO, config)
    for i in range(pods):
        pod = Pod(f"p{i}", (Container.guaranteed("app", cpu_milli=cpus * 1000, memory=GIB),), uid=f"uid-{i}")
        assert admit_pod(node, pod).admitted
    return node


STATIC = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node", reserved_cpus="0")


def test_the_model_checkpoint_is_taken_as_is():
    node = _node(STATIC)
    cpu, memory = model_checkpoints(node)
    assert memory is None
    verdict = kubelet_start(TOPO, STATIC, cpu)
    assert verdict.starts and verdict.refusal is None
    held = CPUSet()
    for cs in verdict.assignments.values():
        for c in cs.values():
            held |= c
    assert verdict.default_cpuset == CPUSet(TOPO.all_cpus) - held
    assert 0 in verdict.default_cpuset  # reserved CPUs stay in the shared pool
    assert verdict.pinned_pods == ["uid-0", "uid-1"] and verdict.pods_to_move == []


def test_no_checkpoint_is_a_fresh_start():
    verdict = kubelet_start(TOPO, STATIC)
    assert verdict.starts and verdict.default_cpuset == CPUSet(TOPO.all_cpus) and verdict.assignments == {}
    strict = dataclasses.replace(STATIC, cpu_manager_options={"strict-cpu-reservation": "true"})
    assert kubelet_start(TOPO, strict).default_cpuset == CPUSet(TOPO.all_cpus) - CPUSet([0])


def test_checkpoint_written_under_none_and_config_now_static():
    none = KubeletConfig()
    cpu, _ = model_checkpoints(_node(none))
    assert json.loads(cpu)["policyName"] == "none"
    verdict = kubelet_start(TOPO, STATIC, cpu)
    assert not verdict.starts
    assert verdict.refusal.message == (
        'start cpu manager error: could not restore state from checkpoint: configured policy "static" differs from '
        'state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint file '
        f'"{CPU_STATE_FILE}" before restarting Kubelet')
    assert verdict.refusal.file == CPU_STATE_FILE
    assert "drain" in verdict.refusal.action and f"delete {CPU_STATE_FILE}" in verdict.refusal.action
    assert "policyName" not in verdict.refusal.message


def test_reserved_cpus_changed_from_0_to_0_1_with_pods_pinned_on_cpu_1():
    before = KubeletConfig(cpu_manager_policy="static", reserved_cpus="0")  # topology none: packed from CPU 1
    node = _node(before)
    assert 1 in node.allocations[0].cpus
    cpu, _ = model_checkpoints(node)
    after = dataclasses.replace(before, reserved_cpus=CPUSet.parse("0-1"))
    assert changed_settings(before, after) == {"reserved_cpus": ("0", "0-1")}
    verdict = kubelet_start(TOPO, after, cpu)
    pool = CPUSet(TOPO.all_cpus) - node.allocations[0].cpus - node.allocations[1].cpus
    assert verdict.refusal.cause == f'not all reserved cpus: "0-1" are present in defaultCpuSet: "{pool}"'
    assert verdict.refusal.message == f"start cpu manager error: {verdict.refusal.cause}"
    assert verdict.pods_to_move == ["uid-0", "uid-1"]
    # the same change on a node whose pinned pods keep off CPU 1 is taken
    assert kubelet_start(TOPO, after, model_checkpoints(_node(before, pods=0))[0]).starts


def test_memory_manager_reserved_memory_changed():
    before = dataclasses.replace(STATIC, memory_manager_policy="Static", reserved_memory={0: {"memory": GIB}})
    node = _node(before)
    cpu, memory = model_checkpoints(node)
    assert kubelet_start(TOPO, before, cpu, memory).starts
    after = dataclasses.replace(before, reserved_memory={0: {"memory": GIB}, 1: {"memory": GIB}})
    verdict = kubelet_start(TOPO, after, cpu, memory)
    assert verdict.refusal.message == ("start memory manager error: [memorymanager] the expected machine state is "
                                       "different from the real one")
    assert verdict.refusal.file == MEMORY_STATE_FILE and verdict.refusal.manager == "Memory Manager"
    assert verdict.pods_to_move == ["uid-0", "uid-1"]


def test_memory_manager_without_reserved_memory_refuses_to_be_built():
    config = dataclasses.replace(STATIC, memory_manager_policy="Static")
    verdict = kubelet_start(TOPO, config)
    assert verdict.refusal.message == "[memorymanager] you should specify the system reserved memory"
    assert verdict.refusal.file is None and verdict.refusal.action.startswith("fix the kubelet configuration")


def test_memory_checkpoint_of_another_policy():
    static = dataclasses.replace(STATIC, memory_manager_policy="Static", reserved_memory={0: {"memory": GIB}})
    cpu, memory = model_checkpoints(_node(static))
    verdict = kubelet_start(TOPO, STATIC, cpu, memory)
    assert verdict.refusal.cause == '[memorymanager] configured policy "None" differs from state checkpoint policy ' \
                                    '"Static"'
    assert "delete the memory manager checkpoint file" in verdict.refusal.message


def test_static_policy_needs_reserved_cpus():
    verdict = kubelet_start(TOPO, KubeletConfig(cpu_manager_policy="static"))
    assert verdict.refusal.message == ("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu "
                                       "to be greater than zero")
    assert kubelet_start(TOPO, KubeletConfig(cpu_manager_policy="static", reserved_cpu_milli=1500)).starts


def test_cpus_of_the_checkpoint_not_on_this_machine():
    state = json.dumps({"policyName": "static", "defaultCpuSet": "0-31", "checksum": 1})
    verdict = kubelet_start(TOPO, STATIC, state)
    assert verdict.refusal.cause == 'current set of available CPUs "0-15" doesn\'t match with CPUs in state "0-31"'


def test_topology_manager_beyond_eight_numa_nodes():
    big = synthetic(1, 9, 1, 1)
    config = KubeletConfig(topology_manager_policy="best-effort")
    assert kubelet_start(big, config).refusal.message == "unsupported on machines with more than 8 NUMA Nodes"
    wider = dataclasses.replace(config, topology_manager_options={"max-allowable-numa-nodes": "9"})
    assert kubelet_start(big, wider).starts


def test_a_checkpoint_that_is_not_one_is_bad_input():
    with pytest.raises(FormatError):
        kubelet_start(TOPO, STATIC, '{"policyName": 3}')


def test_a_verdict_without_a_refusal_says_so_instead_of_failing():
    """`summary` (and so `to_dict`) read `refusal.message` of a verdict that does not start, refusal or not."""
    verdict = StartVerdict(starts=False)
    assert verdict.summary == "the kubelet does not start"
    assert verdict.to_dict()["refusal"] is None
