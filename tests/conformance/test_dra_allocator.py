"""Every transcribed case of upstream's structured allocator table (tests/conformance/data/dra_allocator.json,
ENGINE.md §8.2): the objects read by the engine's DRA reader, allocated by its allocator on the case's node."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from scheduler_core.dra.allocator import AllocationError, Allocator
from scheduler_core.dra.objects import read_dra
from tests.conftest import load_vectors

DATA = load_vectors("dra_allocator")
CASES = DATA["cases"]


def _claims(case: dict) -> list:
    """Each claim read on its own (upstream's cases reuse names); no namespace, as upstream's test claims."""
    out = []
    for obj in case["claims"]:
        (claim,) = read_dra([obj]).claims.values()
        out.append(dataclasses.replace(claim, namespace=""))
    return out


def test_every_case_names_its_source() -> None:
    assert len(CASES) >= 50
    for case in CASES:
        assert case["source"]["case"] == case["name"]
        assert {"repo", "file", "test", "commit"} <= set(case["source"])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_upstream_allocator_case(case: dict) -> None:
    state = read_dra(case["classes"] + case["slices"])
    allocator = Allocator(state.classes, state.slices)
    allocated = {tuple(k) for k in case["allocated"]}
    node = case["node"]
    expect = case["expect"]
    if "error" in expect:
        with pytest.raises(AllocationError, match=expect["error"].replace("(", r"\(").replace(")", r"\)")
                           .replace("?", r"\?")):
            allocator.allocate(node["name"], _claims(case), allocated, node["labels"])
        return
    got = allocator.allocate(node["name"], _claims(case), allocated, node["labels"])
    if expect["results"] is None:
        assert got is None
        return
    assert got is not None
    assert [Counter((r.request, r.driver, r.pool, r.device) for r in claim) for claim in got] == \
        [Counter(tuple(r) for r in claim) for claim in expect["results"]]
