"""Conformance: Memory Manager static-policy hints (ENGINE.md §2.8) on kubelet_memory_hints.json."""

import pytest

from scheduler_core.kubelet.memorymanager.policy_static import memory_topology_hints
from scheduler_core.kubelet.memorymanager.state import MachineState
from scheduler_core.model.bitmask import bits_of
from scheduler_core.model.pods import Container, Pod, pod_memory_request
from tests.conftest import load_vectors

CASES = load_vectors("kubelet_memory_hints")["cases"]


def _cases(kind):
    return [pytest.param(c, id=c["id"]) for c in CASES if c["kind"] == kind]


def _as_json(result):
    if result is None:
        return None
    return {r: [{"affinity": bits_of(h.affinity), "preferred": h.preferred} for h in hints]
            for r, hints in result.items()}


@pytest.mark.parametrize("case", _cases("memory_topology_hints"))
def test_memory_topology_hints(case):
    state = None if case["machine_state"] is None else MachineState.from_dict(case["machine_state"])
    before = None if state is None else state.to_dict()
    got = memory_topology_hints(state, case["requested"], qos=case["pod_qos"],
                                existing_blocks=case["existing_blocks"])
    assert _as_json(got) == case["expected"]
    if state is not None:
        assert state.to_dict() == before, "computing hints must not change the machine state"


@pytest.mark.parametrize("case", _cases("memory_topology_hints"))
def test_memory_hints_non_guaranteed_is_none(case):
    state = None if case["machine_state"] is None else MachineState.from_dict(case["machine_state"])
    for qos in ("Burstable", "BestEffort"):
        assert memory_topology_hints(state, case["requested"], qos=qos,
                                     existing_blocks=case["existing_blocks"]) is None


def _container(spec, kind):
    return Container(spec["name"], spec["requests"], spec["requests"], kind)


@pytest.mark.parametrize("case", _cases("pod_requested_memory"))
def test_pod_requested_memory(case):
    inits = [_container(c, "sidecar" if c.get("restartable") else "init") for c in case["init_containers"]]
    apps = [_container(c, "app") for c in case["containers"]]
    pod = Pod("p", apps, inits)
    assert pod_memory_request(pod) == case["expected"]["result"]


def test_machine_state_round_trip():
    for case in CASES:
        if case.get("machine_state"):
            state = MachineState.from_dict(case["machine_state"])
            assert state.to_dict() == {str(k): v for k, v in case["machine_state"].items()}
