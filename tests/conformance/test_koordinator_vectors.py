"""Koordinator NodeNUMAResource CPU accumulator vectors (tests/conformance/data/koordinator_cpu_accumulator.json).

Every test of upstream's cpu_accumulator_test.go: the CPUs taken must be exactly upstream's.
"""

from __future__ import annotations

import pytest

from scheduler_core.koordinator.cpu_accumulator import (
    EXCLUSIVE_NONE,
    MOST_ALLOCATED,
    PCPU_LEVEL,
    AccumulatorError,
    Allocated,
    CPUAccumulator,
    CPUInfo,
    CPUTopology,
    take_cpus,
    take_preferred_cpus,
)
from scheduler_core.model.cpuset import CPUSet
from tests.conftest import load_vectors

CASES = load_vectors("koordinator_cpu_accumulator")["cases"]


def topology(shape: list[int], socket_core_ids: bool = False) -> CPUTopology:
    """buildCPUTopologyForTest(sockets, nodes per socket, cores per node, CPUs per core)."""
    sockets, nodes, cores, threads = shape
    details = {}
    node = core = cpu = 0
    for s in range(sockets):
        for _n in range(nodes):
            for _c in range(cores):
                for _t in range(threads):
                    details[cpu] = CPUInfo(s, node, s << 16 | core if socket_core_ids else core)
                    cpu += 1
                core += 1
            node += 1
    return CPUTopology(details)


def ids(text: str) -> set[int]:
    return set(CPUSet.parse(text))


def by_kind(kind: str) -> list:
    return [pytest.param(c, id=c["id"]) for c in CASES if c["kind"] == kind]


def test_every_case_has_its_source():
    for case in CASES:
        src = case["source"]
        assert src["repo"] == "koordinator-sh/koordinator" and len(src["commit"]) == 40, case["id"]
        assert src["file"].endswith("cpu_accumulator_test.go") and src["test"].startswith("Test"), case["id"]
    assert len({c["id"] for c in CASES}) == len(CASES) == 46


@pytest.mark.parametrize("case", by_kind("take_cpus"))
def test_take_cpus(case):
    topo = topology(case["topology"])
    allocated = {c: Allocated(1, case["allocated_exclusive"]) for c in ids(case["allocated"])}
    available = set(topo.details) - set(allocated)
    exp = case["expected"]
    try:
        got = take_cpus(topo, case["max_ref_count"], available, allocated, case["needed"], case["bind"],
                        case["exclusive"], case["strategy"])
    except AccumulatorError:
        assert exp["error"]
        return
    assert not exp["error"]
    assert got == ids(exp["cpus"])


@pytest.mark.parametrize("case", by_kind("spread_free_cpus"))
def test_spread_free_cpus(case):
    topo = topology(case["topology"])
    acc = CPUAccumulator(topo, 1, topo.details, {}, 8, EXCLUSIVE_NONE, case["strategy"])
    assert acc.spread(acc.free_cpus(False)) == case["expected"]["order"]


@pytest.mark.parametrize("case", by_kind("ref_count_sequence"))
def test_ref_count_sequence(case):
    topo = topology(case["topology"], case["socket_core_ids"])
    limit = case["max_ref_count"]
    held: dict[int, Allocated] = {}
    for step in case["steps"]:
        available = {c for c in topo.details if c not in held or held[c].ref_count < limit}
        if step["needed"] == 0:
            assert available == ids(step["available_after"])
            continue
        got = take_cpus(topo, limit, available, held, step["needed"], step["bind"], EXCLUSIVE_NONE, MOST_ALLOCATED)
        assert got == ids(step["expected"])
        for c in got:
            held[c] = Allocated(held[c].ref_count + 1 if c in held else 1, PCPU_LEVEL)


@pytest.mark.parametrize("case", by_kind("take_preferred_cpus"))
def test_take_preferred_cpus(case):
    topo = topology(case["topology"])
    args = (case["needed"], case["bind"], case["exclusive"], case["strategy"])
    if case["preferred"] is None:
        got = take_cpus(topo, 1, ids(case["available"]), {}, *args)
    else:
        got = take_preferred_cpus(topo, 1, ids(case["available"]), ids(case["preferred"]), {}, *args)
    assert got == ids(case["expected"]["cpus"])
