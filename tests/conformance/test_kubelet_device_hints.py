"""Conformance: Device Manager topology hints (ENGINE.md §2.9) on kubelet_device_hints.json."""

import pytest

from scheduler_core.kubelet.devicemanager.topology_hints import (
    container_device_hints,
    device_topology_hints,
    pod_device_hints,
    pod_device_requests,
)
from scheduler_core.model.bitmask import bits_of, mask_of
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.quantity import count, cpu_milli
from scheduler_core.model.topology import Device
from tests.conftest import load_vectors

CASES = load_vectors("kubelet_device_hints")["cases"]


def _cases(kind):
    return [pytest.param(c, id=c["id"]) for c in CASES if c["kind"] == kind]


def _devices(case):
    healthy = set(case["healthy"])
    return [Device(d["id"], case["resource"], None if d["numa"] is None else tuple(d["numa"]), d["id"] in healthy)
            for d in case["devices"]]


def _as_json(hints):
    if hints is None:
        return None
    return [{"affinity": None if h.affinity is None else bits_of(h.affinity), "preferred": h.preferred}
            for h in hints]


@pytest.mark.parametrize("case", _cases("device_topology_hints"))
def test_device_topology_hints(case):
    resource = case["resource"]
    devices = _devices(case)
    in_use = set(case["allocated_to_others"]) | set(case["allocated_to_self"])
    requests = {resource: case["request"]}
    allocated = {resource: case["allocated_to_self"]}
    if case["scope"] == "container":
        got = container_device_hints(case["numa_nodes"], devices, requests, in_use, allocated,
                                     {resource: case["reusable"]})
    else:
        got = pod_device_hints(case["numa_nodes"], devices, requests, in_use, allocated)
    assert set(got) == {resource}
    # Generation order (IterateBitMasks) is reproduced exactly, so the lists compare as lists.
    assert _as_json(got[resource]) == case["expected"]


@pytest.mark.parametrize("case", [c for c in _cases("device_topology_hints")
                                  if c.values[0]["expected"] and not c.values[0]["allocated_to_self"]])
def test_generate_hints_directly(case):
    """The contract function alone gives the same hints from the free devices."""
    devices = _devices(case)
    free = set(case["healthy"]) - set(case["allocated_to_others"])
    got = device_topology_hints(case["numa_nodes"], devices, free, case["reusable"], case["request"])
    assert _as_json(got) == case["expected"]
    assert all(h.affinity & mask_of(case["numa_nodes"]) == h.affinity for h in got)


def _container(i, spec, kind):
    limits = {}
    for res, value in spec["limits"].items():
        limits[res] = cpu_milli(value) if res == "cpu" else count(value)
    return Container(f"{kind}{i}", limits, limits, kind)


@pytest.mark.parametrize("case", _cases("pod_device_request"))
def test_pod_device_request(case):
    inits = [_container(i, c, "sidecar" if c.get("restartable") else "init")
             for i, c in enumerate(case["init_containers"])]
    apps = [_container(i, c, "app") for i, c in enumerate(case["containers"])]
    pod = Pod("p", apps, inits)
    assert pod_device_requests(pod, case["registered_resources"]) == case["expected"]["result"]
