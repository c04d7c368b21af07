"""Conformance: filterByAffinity and devicesToAllocate (ENGINE.md §2.9) on
kubelet_filter_by_affinity.json."""

import itertools

import pytest

from scheduler_core.kubelet.devicemanager.manager import devices_to_allocate, filter_by_affinity
from scheduler_core.model.topology import Device
from tests.conftest import load_vectors

CASES = load_vectors("kubelet_filter_by_affinity")["cases"]


def _cases(kind):
    return [pytest.param(c, id=c["id"]) for c in CASES if c["kind"] == kind]


def _devices(case):
    healthy = set(case.get("healthy", [d["id"] for d in case["devices"]]))
    resource = case.get("resource", "resource")
    return [Device(d["id"], resource, None if d["numa"] is None else tuple(d["numa"]), d["id"] in healthy)
            for d in case["devices"]]


@pytest.mark.parametrize("case", _cases("filter_by_affinity"))
def test_filter_by_affinity(case):
    aligned, unaligned, no_affinity = filter_by_affinity(_devices(case), case["available"], case["hint_affinity"])
    exp = case["expected"]
    assert sorted(aligned) == sorted(exp["aligned"])
    assert sorted(unaligned) == sorted(exp["unaligned"])
    assert sorted(no_affinity) == sorted(exp["no_affinity"])


@pytest.mark.parametrize("case", _cases("filter_by_affinity"))
def test_filter_by_affinity_order_independent(case):
    """The classification does not depend on the order devices or available ids are given in."""
    devices = _devices(case)
    expected = filter_by_affinity(devices, case["available"], case["hint_affinity"])
    perms = itertools.islice(itertools.permutations(range(len(devices))), 720)
    for perm in perms:
        shuffled = [devices[i] for i in perm]
        avail = [case["available"][i] for i in perm if i < len(case["available"])]
        assert filter_by_affinity(shuffled, avail, case["hint_affinity"]) == expected


def _plugin(case, calls):
    if case["plugin_preferred_allocation"] is None:
        return None

    def get_preferred(available, must_include, size):
        calls.append((available, must_include, size))
        return list(case["plugin_preferred_allocation"])

    return get_preferred


@pytest.mark.parametrize("case", _cases("topology_aligned_allocation"))
def test_topology_aligned_allocation(case):
    devices = _devices(case)
    calls = []
    got = devices_to_allocate(case["resource"], devices, case["request"], in_use=case["in_use"],
                              reusable=case["reusable"], affinity=case["hint_affinity"],
                              preferred_allocation=_plugin(case, calls))
    exp = case["expected"]
    assert len(got) == exp["size"]
    assert set(exp["must_contain"]) <= got
    numa = {d.id: d.numa for d in devices}
    per_numa = {}
    for i in got:
        if numa[i]:
            per_numa[str(numa[i][0])] = per_numa.get(str(numa[i][0]), 0) + 1
    assert per_numa == exp["per_numa_counts"]
    assert not got & set(case["in_use"]) - set(case["reusable"])


@pytest.mark.parametrize("case", _cases("preferred_allocation_parameters"))
def test_preferred_allocation_parameters(case):
    calls = []
    devices_to_allocate(case["resource"], _devices(case), case["request"], in_use=case["in_use"],
                        reusable=case["reusable"], affinity=case["hint_affinity"],
                        preferred_allocation=_plugin(case, calls))
    assert calls, "GetPreferredAllocation was not called"
    available, must_include, size = calls[0]
    exp = case["expected"]
    assert sorted(available) == sorted(exp["available"])
    assert sorted(must_include) == sorted(exp["must_include"])
    assert size == exp["size"]
