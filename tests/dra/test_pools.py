"""A node's pools: which slices serve it (node name, all nodes, selector operators) and the pool's state."""

from __future__ import annotations

import pytest

from scheduler_core.dra.objects import read_dra
from scheduler_core.dra.pools import gather_pools, node_matches

from .objects import device, resource_slice

LABELS = {"zone": "a", "gpus": "8"}


def _with_selector(*requirements: dict) -> dict:
    obj = resource_slice("s", "d", None, [device("x")], pool="p")
    obj["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": list(requirements)}]}
    return obj


@pytest.mark.parametrize(("requirement", "matches"), [
    ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
    ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
    ({"key": "zone", "operator": "Exists"}, True),
    ({"key": "rack", "operator": "DoesNotExist"}, True),
    ({"key": "gpus", "operator": "Gt", "values": ["4"]}, True),
    ({"key": "gpus", "operator": "Lt", "values": ["4"]}, False),
    ({"key": "zone", "operator": "Gt", "values": ["4"]}, False),  # not a number: no match
])
def test_node_selector_operators(requirement: dict, matches: bool) -> None:
    (piece,) = read_dra([_with_selector(requirement)]).slices
    assert node_matches(piece, "n1", LABELS) is matches


def test_a_slice_bound_to_nothing_serves_no_node_and_all_nodes_serves_every_one() -> None:
    unbound = read_dra([resource_slice("s", "d", None, [device("x")], pool="p")]).slices[0]
    everywhere = read_dra([resource_slice("s", "d", None, [device("x")], pool="p", all_nodes=True)]).slices[0]
    assert not node_matches(unbound, "n1", LABELS) and node_matches(everywhere, "n9", {})


def test_the_newest_generation_replaces_older_slices_and_counts_decide_completeness() -> None:
    slices = read_dra([resource_slice("old", "d", "n1", [device("a")], pool="p", generation=1, count=1),
                       resource_slice("new-1", "d", "n1", [device("b")], pool="p", generation=2, count=2),
                       resource_slice("new-2", "d", "n1", [device("b")], pool="p", generation=2, count=2)]).slices
    (pool,) = gather_pools(slices, "n1", {})
    assert [s.name for s in pool.slices] == ["new-1", "new-2"]
    assert (pool.incomplete, pool.invalid) == (False, True)  # device b twice in one pool
    (half,) = gather_pools(slices[:2], "n1", {})
    assert (half.incomplete, half.invalid, half.pool_id) == (True, False, "d/p")
