"""Koordinator topology manager vectors (tests/conformance/data/koordinator_topology_policy.json).

Every Merge case of upstream's policy tests, for each policy, and every checkExclusivePolicy case:
the merged hint (mask, preferred, unsatisfied, score) and the reasons must be exactly upstream's."""

from __future__ import annotations

import pytest

from scheduler_core.koordinator.hints import Hint, exclusive_ok, merge
from scheduler_core.model.bitmask import mask_of
from tests.conftest import load_vectors

CASES = load_vectors("koordinator_topology_policy")["cases"]


def hint(h: dict, numa_nodes: list[int]) -> Hint:
    bits = h["mask"]
    mask = None if bits is None else mask_of(numa_nodes if bits == "all" else bits)
    return Hint(mask, h["preferred"], h["unsatisfied"], h["score"])


def providers(case: dict) -> list:
    nodes = case["numa_nodes"]
    return [p if not p else {r: None if hs is None else [hint(h, nodes) for h in hs] for r, hs in p.items()}
            for p in case["providers"]]


def by_kind(kind: str) -> list:
    return [pytest.param(c, id=f"{c.get('policy', '')}:{c['id']}") for c in CASES if c["kind"] == kind]


def test_every_case_has_its_source():
    for case in CASES:
        src = case["source"]
        assert src["repo"] == "koordinator-sh/koordinator" and len(src["commit"]) == 40, case["id"]
        assert case["id"] == f"{src['test']}/{src['case']}"
    assert len(CASES) == 76


@pytest.mark.parametrize("case", by_kind("merge"))
def test_merge(case):
    best, _admit, reasons = merge(case["policy"], case["numa_nodes"], providers(case), "Preferred", [])
    assert best == hint(case["expected"]["hint"], case["numa_nodes"])
    if case["expected"]["reasons"] != "unchecked":
        assert reasons == (case["expected"]["reasons"] or [])


@pytest.mark.parametrize("case", by_kind("exclusive"))
def test_check_exclusive_policy(case):
    assert exclusive_ok(hint(case["hint"], []), case["exclusive"], case["status"]) is case["expected"]
