"""kubelet_take_by_topology.json: packed/spread/uncore and distributed CPU selection, accumulator
orderings and the static policy's allocateCPUs (ENGINE.md §2.6, §2.7)."""

import pytest

from scheduler_core.errors import InsufficientResourcesError
from scheduler_core.kubelet.cpumanager.cpu_assignment import (
    accumulator_order,
    take_by_topology_numa_distributed,
    take_by_topology_numa_packed,
)
from scheduler_core.kubelet.cpumanager.cpu_manager import allocate_cpus
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.topology import Topology
from tests.conftest import load_vectors

DATA = load_vectors("kubelet_take_by_topology")
TOPOLOGIES = {name: Topology.from_dict({"cpus": t["cpus"], "header": t["header"]})
              for name, t in DATA["topologies"].items()}


def _cases(kind, algorithm=None):
    cases = [c for c in DATA["cases"] if c["kind"] == kind and (algorithm is None or c.get("algorithm") == algorithm)]
    return pytest.mark.parametrize("case", cases, ids=[c["id"] for c in cases])


def _check(case, run):
    expected = case["expected"]
    if "error" in expected:
        with pytest.raises(InsufficientResourcesError) as info:
            run()
        assert str(info.value) == expected["error"]
        return
    got = run()
    assert got == CPUSet(expected["cpus"]), f"{case['id']}: got {got}, expected {expected['cpus_str']}"
    assert str(got) == expected["cpus_str"]


def test_topologies_use_declared_header():
    topo = TOPOLOGIES["topoDualSocketHT"]
    assert topo.header.num_numa_nodes == 0 and topo.numa_first
    assert TOPOLOGIES["topoDualSocketMultiNumaPerSocketHT"].numa_first is False


@_cases("take_by_topology", "packed")
def test_packed(case):
    topo = TOPOLOGIES[case["topology"]]
    _check(case, lambda: take_by_topology_numa_packed(
        topo, CPUSet(case["available"]), case["num_cpus"], case["cpu_sorting_strategy"],
        case["prefer_align_by_uncore_cache"]))


@_cases("take_by_topology", "distributed")
def test_distributed(case):
    topo = TOPOLOGIES[case["topology"]]
    assert case.get("align_by_socket", False) is False
    _check(case, lambda: take_by_topology_numa_distributed(
        topo, CPUSet(case["available"]), case["num_cpus"], case["cpu_group_size"], case["cpu_sorting_strategy"]))


@_cases("accumulator_order")
def test_accumulator_order(case):
    topo = TOPOLOGIES[case["topology"]]
    got = accumulator_order(topo, CPUSet(case["available"]), case["query"], case["cpu_sorting_strategy"])
    expected = case["expected"]
    if expected["order_significant"]:
        assert got == expected["result"]
    else:
        assert sorted(got) == sorted(expected["result"])


@_cases("allocate_cpus")
def test_allocate_cpus(case):
    topo = TOPOLOGIES[case["topology"]]
    _check(case, lambda: allocate_cpus(
        topo, case["num_cpus"], case["numa_affinity"], CPUSet(case["default_cpuset"]), CPUSet(case["reserved"]),
        CPUSet(case["reusable"]), case["options"]))
