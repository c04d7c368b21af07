"""kubelet_static_policy_add.json, kubelet_memory_static_policy.json, kubelet_scopes.json: the CPU and
Memory Managers' static policies as state machines over their checkpoint (Allocate, RemoveContainer,
Start's validation, construction) and the Topology Manager's Admit and construction (ENGINE.md §2.4,
§2.6, §2.8, §2.10). Every kind each file's `schema` names is evaluated; a kind this module does not
know fails the run."""

import pytest

from scheduler_core.errors import EngineError, InsufficientResourcesError, PolicyError
from scheduler_core.kubelet.admission import _Admission
from scheduler_core.kubelet.cpumanager.cpu_manager import SMTAlignmentError, check_smt_alignment
from scheduler_core.kubelet.cpumanager.policy_static import StateValidationError, StaticPolicy
from scheduler_core.kubelet.kubelet_start import new_topology_manager
from scheduler_core.kubelet.memorymanager.policy_static import MemoryAllocationError, MemoryManager
from scheduler_core.kubelet.memorymanager.start_state import (
    check_system_reserved,
    default_machine_state,
    validate_state,
)
from scheduler_core.kubelet.memorymanager.state import Block, MachineState
from scheduler_core.kubelet.topologymanager.hint import TopologyHint
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.kubelet_config import CPUOptions, KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.pods import APP, INIT, SIDECAR, Container, Pod
from scheduler_core.model.topology import Topology, synthetic
from tests.conftest import load_vectors

CPU = load_vectors("kubelet_static_policy_add")
MEMORY = load_vectors("kubelet_memory_static_policy")
SCOPES = load_vectors("kubelet_scopes")
TOPOLOGIES = {name: Topology.from_dict({"cpus": t["cpus"], "header": t["header"]})
              for name, t in CPU["topologies"].items()}


def _cpus(value) -> CPUSet:
    if value is None:
        return CPUSet()
    if isinstance(value, dict):
        return CPUSet(value["cpus"])
    return CPUSet(value)


def _container(spec: dict, kind: str) -> Container:
    if spec.get("kind"):
        kind = spec["kind"]
    elif spec.get("restartable"):
        kind = SIDECAR
    return Container(spec["name"], spec.get("requests") or {}, spec.get("limits") or {}, kind)


def _pod(spec: dict) -> Pod:
    return Pod(spec["uid"], tuple(_container(c, APP) for c in spec["containers"]),
               tuple(_container(c, INIT) for c in spec.get("init_containers") or ()), uid=spec["uid"])


def _hint(value) -> TopologyHint | None:
    if value is None:
        return None
    return TopologyHint(sum(1 << n for n in value["affinity"]) if value["affinity"] is not None else None,
                        value["preferred"])


def _policy(inputs: dict) -> StaticPolicy:
    return StaticPolicy(TOPOLOGIES[inputs["topology"]], inputs["num_reserved_cpus"],
                        inputs.get("reserved_cpus"), inputs.get("options") or {})


def _assignments(value: dict | None) -> dict:
    return {pod: {name: _cpus(cpus) for name, cpus in containers.items()}
            for pod, containers in (value or {}).items()}


def _started(inputs: dict) -> StaticPolicy:
    """A policy holding exactly the given state (the checkpoint as Allocate/RemoveContainer see it)."""
    policy = _policy(inputs)
    policy.default = _cpus(inputs["default_cpuset"])
    policy.assignments = _assignments(inputs.get("assignments"))
    return policy


# -- CPU Manager static policy -------------------------------------------------------------------

def _static_policy_allocate(case):
    inputs, expected = case["inputs"], case["expected"]
    policy = _started(inputs)
    pod = _pod(inputs["pod"])
    container = next(c for c in pod.all_containers() if c.name == inputs["container"])
    if expected["error"]:
        err = {"SMTAlignmentError": SMTAlignmentError, "InsufficientCPUs": InsufficientResourcesError}
        with pytest.raises(err[expected["error"]["kind"]]) as exc:
            policy.allocate(pod, container, _hint(inputs["topology_hint"]))
        assert str(exc.value) == expected["error"]["message"]
    else:
        policy.allocate(pod, container, _hint(inputs["topology_hint"]))
    held = policy.assignments.get(pod.uid, {}).get(container.name)
    assert (held is not None) == expected["cpu_alloc"]
    if expected["cpuset"] is not None:
        assert held == _cpus(expected["cpuset"])


def _static_policy_reuse(case):
    inputs, expected = case["inputs"], case["expected"]
    policy = _started(inputs)
    pod = _pod(inputs["pod"])
    for container in pod.all_containers():
        policy.allocate(pod, container)
    assert policy.default == _cpus(expected["default_after_alloc"])
    if inputs.get("remove_container") is not None:
        policy.remove_container(pod.uid, inputs["remove_container"])
        assert policy.default == _cpus(expected["default_after_remove"])


def _static_policy_remove(case):
    inputs, expected = case["inputs"], case["expected"]
    policy = _started(inputs)
    policy.remove_container(inputs["pod_uid"], inputs["container"])
    assert policy.default == _cpus(expected["default_cpuset"])
    if "container_removed" in expected:
        still = inputs["container"] in policy.assignments.get(inputs["pod_uid"], {})
        assert still != expected["container_removed"]


def _static_policy_start(case):
    inputs, expected = case["inputs"], case["expected"]
    policy = _policy(inputs)
    default, assignments = _cpus(inputs["default_cpuset"]), _assignments(inputs.get("assignments"))
    if expected["error"]:
        with pytest.raises(StateValidationError) as exc:
            policy.start(default, assignments)
        assert exc.value.kind == expected["error"]["kind"]
        assert str(exc.value) == expected["error"]["message"]
    else:
        assert policy.start(default, assignments) == _cpus(expected["default_cpuset"])
        assert policy.default == _cpus(expected["default_cpuset"])


def _new_static_policy(case):
    inputs, expected = case["inputs"], case["expected"]
    if expected["error"]:
        with pytest.raises(PolicyError) as exc:
            _policy(inputs)
        assert str(exc.value) == expected["error"]["message"]
    else:
        _policy(inputs)


def _cpu_policy_options(case):
    inputs, expected = case["inputs"], case["expected"]
    if expected["error"]:
        with pytest.raises(PolicyError):
            CPUOptions.parse(inputs["options"])
        return
    on = CPUOptions.parse(inputs["options"]).to_dict()
    assert set(on) == {name for name, value in (expected["enabled"] or {}).items() if value}


def _smt_alignment_text(case):
    inputs, expected = case["inputs"], case["expected"]
    options = inputs.get("options") or {"full-pcpus-only": "true"}
    if "num_reserved_cpus" in inputs:
        reserved = _policy({**inputs, "options": options}).reserved
    else:
        reserved = _cpus(inputs.get("reserved_cpus", inputs.get("reserved")))
    error = expected.get("error") or expected
    message = error if isinstance(error, str) else error.get("message", error.get("text"))
    with pytest.raises(SMTAlignmentError) as exc:
        check_smt_alignment(TOPOLOGIES[inputs["topology"]], inputs["request"], _cpus(inputs["default_cpuset"]),
                            reserved, options)
    assert str(exc.value) == message


# -- Memory Manager static policy ------------------------------------------------------------------

def _blocks(value: dict | None) -> dict:
    return {pod: {name: [Block(tuple(b["numa_affinity"]), b["type"], b["size"]) for b in blocks]
                  for name, blocks in containers.items()}
            for pod, containers in (value or {}).items()}


def _as_multisets(assignments: dict) -> dict:
    return {pod: {name: sorted((b.numa_affinity, b.type, b.size) for b in blocks)
                  for name, blocks in containers.items()}
            for pod, containers in assignments.items()}


def _manager(inputs: dict) -> MemoryManager:
    blocks = {(pod, name): list(bs) for pod, containers in _blocks(inputs.get("assignments")).items()
              for name, bs in containers.items()}
    reusable = inputs.get("init_containers_reusable_memory") or {}
    return MemoryManager(MachineState.from_dict(inputs["machine_state"]), blocks,
                         {pod: {m: dict(r) for m, r in masks.items()} for pod, masks in reusable.items()})


def _held(manager: MemoryManager) -> dict:
    out: dict = {}
    for (pod, name), blocks in manager.blocks.items():
        out.setdefault(pod, {})[name] = blocks
    return out


def _memory_allocate(case):
    inputs, expected = case["inputs"], case["expected"]
    manager = _manager(inputs)
    pod = _pod(inputs["pod"])
    hint = _hint(inputs["topology_hint"])
    containers = [pod.containers[0]] if inputs["allocate"] == "first_app_container" else list(pod.all_containers())
    if expected["error"]:
        with pytest.raises(MemoryAllocationError) as exc:
            for c in containers:
                manager.allocate(pod, c, hint)
        assert str(exc.value) == expected["error"]
        return
    for c in containers:
        manager.allocate(pod, c, hint)
    assert _as_multisets(_held(manager)) == _as_multisets(_blocks(expected["assignments"]))
    assert manager.machine_state.to_dict() == MachineState.from_dict(expected["machine_state"]).to_dict()


def _memory_remove_container(case):
    inputs, expected = case["inputs"], case["expected"]
    manager = _manager(inputs)
    manager.remove_container(inputs["pod_uid"], inputs["container"])
    assert _as_multisets(_held(manager)) == _as_multisets(_blocks(expected["assignments"]))
    assert manager.machine_state.to_dict() == MachineState.from_dict(expected["machine_state"]).to_dict()


def _machine(inputs: dict) -> dict:
    return {int(n["id"]): (n["memory"], dict(n.get("hugepages") or {})) for n in inputs["machine"]}


def _reserved(inputs: dict) -> dict:
    return {int(n): dict(r) for n, r in (inputs.get("system_reserved") or {}).items()}


def _memory_default_state(case):
    inputs, expected = case["inputs"], case["expected"]
    state = validate_state(MachineState({}), {}, default_machine_state(_machine(inputs), _reserved(inputs)))
    assert state.to_dict() == MachineState.from_dict(expected["machine_state"]).to_dict()


def _memory_state_replay(case):
    inputs, expected = case["inputs"], case["expected"]
    stored = MachineState.from_dict(inputs.get("stored_machine_state") or {})
    default = default_machine_state(_machine(inputs), _reserved(inputs))
    assignments = _blocks(inputs.get("assignments"))
    if expected["error"]:
        with pytest.raises(MemoryAllocationError) as exc:
            validate_state(stored, assignments, default)
        assert str(exc.value) == expected["error"]
        return
    kept = validate_state(stored, assignments, default)
    assert kept.to_dict() == MachineState.from_dict(expected["machine_state"]).to_dict()


def _memory_new_policy(case):
    inputs, expected = case["inputs"], case["expected"]
    reserved = _reserved(inputs)
    if expected["error"]:
        with pytest.raises(MemoryAllocationError) as exc:
            check_system_reserved(reserved)
        assert str(exc.value) == expected["error"]
    else:
        check_system_reserved(reserved)


# -- Topology Manager ------------------------------------------------------------------------------

def _providers(value: list) -> list:
    out = []
    for provider in value:
        if provider is None:
            out.append(None)
            continue
        out.append({res: None if hints is None else [_hint(h) for h in hints] for res, hints in provider.items()})
    return out


class _MockProvider:
    """upstream's mockHintProvider: the same answer for a container and for the pod."""

    def __init__(self, hints):
        self.hints = hints

    def get_topology_hints(self, pod, container):
        return self.hints

    def get_pod_topology_hints(self, pod):
        return self.hints

    def allocate(self, pod, container, hint):
        return Allocation(pod.uid, container.name)


def _tm_admit(case):
    """The engine's admission loop (each scope, the node's policy) with the mock providers in place of
    the device, CPU and memory managers; the pod has one container that asks for nothing they pin."""
    inputs, expected = case["inputs"], case["expected"]
    info = inputs["numa_info"]
    topology = synthetic(1, len(info["nodes"]), 2, 1)
    for scope in inputs["scopes"]:
        node = Node("n", topology, KubeletConfig(topology_manager_policy=inputs["policy"],
                                                 topology_manager_scope=scope))
        pod = Pod("p", (Container("c", {"memory": 1 << 20}, {"memory": 1 << 20}),), qos=inputs["qos_class"])
        run = _Admission(node, pod)
        run.providers = tuple(_MockProvider(p) for p in _providers(inputs["providers"]))
        result = run.run()
        assert result.admitted == expected["admit"][scope], scope
        if not result.admitted:
            assert result.reason == expected["reason_if_rejected"]


def _tm_new_manager(case):
    inputs, expected = case["inputs"], case["expected"]
    info = inputs["numa_info"] or {"nodes": [], "distances": None}
    distances = info.get("distances")
    if distances is not None:
        distances = {int(k): v for k, v in distances.items()}
    args = (info["nodes"], inputs["policy"], inputs["scope"], inputs["options"], distances)
    if expected["error_contains"]:
        with pytest.raises(EngineError) as exc:
            new_topology_manager(*args)
        assert expected["error_contains"] in str(exc.value)
        return
    policy, scope = new_topology_manager(*args)
    if expected.get("policy") is not None:
        assert policy == expected["policy"]
    if expected.get("scope") is not None:
        assert scope == expected["scope"]


EVALUATE = {
    "static_policy_allocate": _static_policy_allocate, "static_policy_reuse": _static_policy_reuse,
    "static_policy_remove": _static_policy_remove, "static_policy_start": _static_policy_start,
    "new_static_policy": _new_static_policy, "cpu_policy_options": _cpu_policy_options,
    "smt_alignment_text": _smt_alignment_text, "memory_allocate": _memory_allocate,
    "memory_remove_container": _memory_remove_container, "memory_default_state": _memory_default_state,
    "memory_state_replay": _memory_state_replay, "memory_new_policy": _memory_new_policy,
    "tm_admit": _tm_admit, "tm_new_manager": _tm_new_manager,
}


def _all(data):
    return pytest.mark.parametrize("case", data["cases"], ids=[c["id"] for c in data["cases"]])


@pytest.mark.parametrize("data", [CPU, MEMORY, SCOPES], ids=["cpu", "memory", "scopes"])
def test_every_kind_of_the_schema_is_evaluated(data):
    assert set(data["schema"]["kinds"]) <= set(EVALUATE)


@_all(CPU)
def test_cpu_manager_static_policy(case):
    EVALUATE[case["kind"]](case)


@_all(MEMORY)
def test_memory_manager_static_policy(case):
    EVALUATE[case["kind"]](case)


@_all(SCOPES)
def test_topology_manager(case):
    EVALUATE[case["kind"]](case)
