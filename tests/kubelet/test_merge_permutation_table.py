"""The walk-through of Volcano's numa-aware plugin: its CPU × GPU permutation table,
checked against the kubelet's merge semantics (ENGINE.md §2.3)."""

import pytest

from scheduler_core.kubelet.topologymanager.hint import TopologyHint, format_hint
from scheduler_core.kubelet.topologymanager.merge import merge_hints
from scheduler_core.kubelet.topologymanager.policy import iterate_permutations, merge_permutation

T, F = True, False
CPU = [TopologyHint(0b01, T), TopologyHint(0b11, F)]
GPU = [TopologyHint(0b01, T), TopologyHint(0b10, T)]

# P1..P4 of the seed: (cpu, gpu) -> AND result and preferred; P2's empty AND is discarded.
SEED_TABLE = [
    (0b01, 0b01, "{01: T}"),
    (0b01, 0b10, "{00: F}"),
    (0b11, 0b01, "{01: F}"),
    (0b11, 0b10, "{10: F}"),
]


def test_seed000_s63_permutation_table():
    rows = list(iterate_permutations([CPU, GPU]))
    assert [(c.affinity, g.affinity) for c, g in rows] == [(c, g) for c, g, _ in SEED_TABLE]
    merged = [format_hint(merge_permutation(0b11, row), 2) for row in rows]
    assert merged == [text for _, _, text in SEED_TABLE]


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_seed000_s63_best_is_p1(policy):
    result = merge_hints(policy, [{"cpu": CPU}, {"nvidia.com/gpu": GPU}], [0, 1])
    assert result.hint == TopologyHint(0b01, True)
    assert result.admit
