"""The Kubernetes 1.18 Topology Manager blog post's example: the merge parts.

Machine of figure 1: 2 NUMA nodes, CPUs 0-3 on node 0 and 4-7 on node 1, GPU/NIC 0 on node 0 and
GPU/NIC 1 on node 1. Container0 asks for 2 CPUs, 1 GPU and 1 NIC. The seed lists the cross product
of the three resources' hints and each permutation's merged hint (12 rows), and says every policy
picks `{01: True}`. The table below is transcribed from the seed, with True/False written T/F.
"""

import pytest

from scheduler_core.kubelet.topologymanager.hint import TopologyHint, flatten_providers, format_hint
from scheduler_core.kubelet.topologymanager.merge import merge_hints, merge_hints_reference
from scheduler_core.kubelet.topologymanager.policy import iterate_permutations, merge_permutation

NUMA_NODES = [0, 1]
DEFAULT = 0b11
T, F = True, False

CONTAINER0 = [
    {"cpu": [TopologyHint(0b01, T), TopologyHint(0b10, T), TopologyHint(0b11, F)]},
    {"gpu-vendor.com/gpu": [TopologyHint(0b01, T), TopologyHint(0b10, T)]},
    {"nic-vendor.com/nic": [TopologyHint(0b01, T), TopologyHint(0b10, T)]},
]

# (cpu, gpu, nic) -> merged, in the seed's row order (cpu outermost, nic innermost).
SEED_TABLE = [
    ("{01: T}", "{01: T}", "{01: T}", "{01: T}"),
    ("{01: T}", "{01: T}", "{10: T}", "{00: F}"),
    ("{01: T}", "{10: T}", "{01: T}", "{00: F}"),
    ("{01: T}", "{10: T}", "{10: T}", "{00: F}"),
    ("{10: T}", "{01: T}", "{01: T}", "{00: F}"),
    ("{10: T}", "{01: T}", "{10: T}", "{00: F}"),
    ("{10: T}", "{10: T}", "{01: T}", "{00: F}"),
    ("{10: T}", "{10: T}", "{10: T}", "{10: T}"),  # the seed prints {01: True} here; see below
    ("{11: F}", "{01: T}", "{01: T}", "{01: F}"),
    ("{11: F}", "{01: T}", "{10: T}", "{00: F}"),
    ("{11: F}", "{10: T}", "{01: T}", "{00: F}"),
    ("{11: F}", "{10: T}", "{10: T}", "{10: F}"),
]


def _text(hint: TopologyHint) -> str:
    return format_hint(hint, len(NUMA_NODES))


def test_seed003_merge_table() -> None:
    """Each permutation of the cross product, in upstream iteration order, merges to the seed's row."""
    lists = flatten_providers(CONTAINER0)
    rows = list(iterate_permutations(lists))
    assert len(rows) == len(SEED_TABLE) == 12
    for permutation, (cpu, gpu, nic, merged) in zip(rows, SEED_TABLE, strict=True):
        assert tuple(_text(h) for h in permutation) == (cpu, gpu, nic)
        assert _text(merge_permutation(DEFAULT, permutation)) == merged


def test_seed003_merge_table_row_8_is_node_1() -> None:
    """The seed's eighth row reads `[{10: True}, {10: True}, {10: True}] -> {01: True}`: ANDing three
    `10` masks cannot give `01`; the merge is `{10: True}` (an evident typo in the post, which the
    kubelet's mergePermutation and the blog's own algorithm text both contradict)."""
    permutation = [TopologyHint(0b10, T)] * 3
    assert merge_permutation(DEFAULT, permutation) == TopologyHint(0b10, T)


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_seed003_best_hint(policy: str) -> None:
    """"In the example above, every policy uses the {01: True} hint and the pod is admitted."""
    for merge in (merge_hints, merge_hints_reference):
        result = merge(policy, CONTAINER0, NUMA_NODES)
        assert _text(result.hint) == "{01: T}"
        assert result.admit is True


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_seed003_container1_goes_to_node_1(policy: str) -> None:
    """Container1, after Container0 took GPU 0 and NIC 0: only node 1 offers the devices, so the
    alignment is `{cpu: {4, 5}, gpu: 1, nic: 1}`, i.e. the merged hint `{10: T}`."""
    providers = [
        {"cpu": [TopologyHint(0b01, T), TopologyHint(0b10, T), TopologyHint(0b11, F)]},
        {"gpu-vendor.com/gpu": [TopologyHint(0b10, T)]},
        {"nic-vendor.com/nic": [TopologyHint(0b10, T)]},
    ]
    result = merge_hints(policy, providers, NUMA_NODES)
    assert _text(result.hint) == "{10: T}"
    assert result.admit is True


def test_seed003_two_free_cpus_on_different_nodes() -> None:
    """Only 2 CPUs left, one per NUMA node, and a container asks for 2: the CPU manager offers only
    `{11: False}` (the seed's point: not preferred, because one node *could* hold 2 CPUs). Merging
    that alone, best-effort admits the cross-node placement, restricted rejects it, and
    single-numa-node filters it away and rejects with a nil hint."""
    providers = [{"cpu": [TopologyHint(0b11, F)]}]
    best_effort = merge_hints("best-effort", providers, NUMA_NODES)
    assert (_text(best_effort.hint), best_effort.admit) == ("{11: F}", True)
    restricted = merge_hints("restricted", providers, NUMA_NODES)
    assert (_text(restricted.hint), restricted.admit) == ("{11: F}", False)
    single = merge_hints("single-numa-node", providers, NUMA_NODES)
    assert (single.hint, single.admit) == (TopologyHint(None, F), False)


def test_seed003_preferred_beats_narrower_non_preferred() -> None:
    """"Hints with Preferred set to True are considered before those with Preferred False": the
    wider preferred `{11: T}` (the only way to get 2 devices on different nodes) beats a narrower
    non-preferred merge."""
    providers = [
        {"gpu": [TopologyHint(0b11, T)]},
        {"cpu": [TopologyHint(0b01, F), TopologyHint(0b11, T)]},
    ]
    result = merge_hints("restricted", providers, NUMA_NODES)
    assert _text(result.hint) == "{11: T}"
    assert result.admit is True
