"""The fast merge is the cross-product merge: property tests on random providers (nil maps, empty
maps, nil and empty lists, nil / empty / out-of-machine masks, mixed preferred flags), every policy,
with and without prefer-closest on random symmetric distance tables, and each search path forced on
its own (set product only, counting transforms only, automatic)."""

import random
from contextlib import contextmanager
from math import prod

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.bench import capacity_hints
from scheduler_core.errors import TopologyError
from scheduler_core.kubelet.topologymanager import merge_fast as H
from scheduler_core.kubelet.topologymanager.hint import TopologyHint, flatten_providers
from scheduler_core.kubelet.topologymanager.merge import merge_hints, merge_hints_reference

POLICIES = ["none", "best-effort", "restricted", "single-numa-node"]
MODES = {"auto": None, "transforms": 0, "set-product": 1 << 60}
MAX_PERMUTATIONS = 3000


@contextmanager
def search_mode(mode: str):
    saved = H.SET_PRODUCT_BUDGET
    H.SET_PRODUCT_BUDGET = MODES[mode]
    try:
        yield
    finally:
        H.SET_PRODUCT_BUDGET = saved


@st.composite
def machines(draw, max_nodes: int = 8, id_space: int = 10):
    """NUMA ids (contiguous from 0, or any subset of 0..id_space-1) and a symmetric distance table
    with few distinct values, so average-distance ties happen."""
    if draw(st.booleans()):
        nodes = list(range(draw(st.integers(1, max_nodes))))
    else:
        nodes = sorted(draw(st.sets(st.integers(0, id_space - 1), min_size=1, max_size=max_nodes)))
    width = max(nodes) + 1
    table = [[10] * width for _ in range(width)]
    for a in range(width):
        for b in range(a + 1, width):
            table[a][b] = table[b][a] = draw(st.sampled_from([11, 12, 20, 21, 32]))
    return nodes, {a: table[a] for a in nodes}


def hint_lists(nodes: list[int], id_space: int):
    default = 0
    for n in nodes:
        default |= 1 << n
    inside = st.integers(0, default).map(lambda m: m & default)          # may be 0: an empty mask
    anywhere = st.integers(0, (1 << id_space) - 1)                        # may leave the machine
    affinity = st.one_of(st.none(), inside, inside, inside, anywhere)
    hint = st.builds(TopologyHint, affinity, st.booleans())
    return st.one_of(st.none(), st.just([]), st.lists(hint, min_size=1, max_size=12))


@st.composite
def scenarios(draw, max_nodes: int = 8, id_space: int = 10):
    nodes, distances = draw(machines(max_nodes, id_space))
    lists = hint_lists(nodes, id_space)
    provider = st.one_of(st.none(), st.just({}),
                         st.dictionaries(st.sampled_from(["cpu", "gpu", "nic", "memory"]), lists, min_size=1,
                                         max_size=3))
    providers = draw(st.lists(provider, max_size=4))
    if prod(len(lst) for lst in flatten_providers(providers)) > MAX_PERMUTATIONS:
        providers = providers[:1]
        if prod(len(lst) for lst in flatten_providers(providers)) > MAX_PERMUTATIONS:
            providers = []
    return nodes, distances, providers


def _same(policy, providers, nodes, options, distances) -> None:
    fast = merge_hints(policy, providers, nodes, options, distances)
    slow = merge_hints_reference(policy, providers, nodes, options, distances)
    assert (fast.hint, fast.admit, fast.best_non_preferred) == (slow.hint, slow.admit, slow.best_non_preferred)
    assert fast == slow


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(POLICIES), st.booleans(), st.sampled_from(sorted(MODES)))
def test_fast_merge_equals_cross_product(scenario, policy, closest, mode) -> None:
    nodes, distances, providers = scenario
    options = {"prefer-closest-numa-nodes": "true" if closest else "false"}
    with search_mode(mode):
        _same(policy, providers, nodes, options, distances if closest else None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_nodes=16, id_space=24), st.sampled_from(["best-effort", "restricted"]), st.booleans(),
       st.sampled_from(["transforms", "set-product"]))
def test_fast_merge_equals_cross_product_up_to_16_nodes(scenario, policy, closest, mode) -> None:
    nodes, distances, providers = scenario
    options = {"prefer-closest-numa-nodes": str(closest).lower(), "max-allowable-numa-nodes": "16"}
    with search_mode(mode):
        _same(policy, providers, nodes, options, distances if closest else None)


@settings(max_examples=20, deadline=None)
@given(st.randoms(use_true_random=False), st.booleans())
def test_more_than_16_nodes_use_the_set_product(rnd: random.Random, closest: bool) -> None:
    nodes = list(range(20))
    distances = {a: [10 if a == b else 11 + (a ^ b) % 3 for b in range(20)] for a in nodes}
    providers = [{f"r{i}": [TopologyHint(rnd.getrandbits(20) | (1 << rnd.randrange(20)), rnd.random() < 0.3)
                            for _ in range(rnd.randrange(1, 10))]} for i in range(3)]
    options = {"prefer-closest-numa-nodes": str(closest).lower(), "max-allowable-numa-nodes": "24"}
    _same("best-effort", providers, nodes, options, distances if closest else None)


def _every_mask_lists(rnd: random.Random, providers: int, preferred_share: float) -> list:
    return [{f"r{i}": [TopologyHint(z, rnd.random() < preferred_share) for z in range(1, 256)]}
            for i in range(providers)]


def test_all_255_masks_two_providers_match_reference() -> None:
    """8 NUMA nodes, every mask in both lists (65,025 permutations for the reference)."""
    rnd = random.Random(3)
    nodes = list(range(8))
    distances = {a: [10 if a == b else (11 if a // 4 == b // 4 else 21) for b in range(8)] for a in nodes}
    for share in (0.0, 0.02, 0.5):
        providers = _every_mask_lists(rnd, 2, share)
        for mode in ("transforms", "auto"):
            with search_mode(mode):
                _same("best-effort", providers, nodes, {"prefer-closest-numa-nodes": "true"}, distances)
                _same("restricted", providers, nodes, None, None)


def test_all_255_masks_three_providers() -> None:
    """The kubelet would walk 16.6 million permutations here; the answer is known in closed form.
    Without preferred hints: every mask is reachable (pick it in one list and the full mask in the
    others), B = 1, so the best is the lowest single node {0}. With two preferred masks common to all
    three lists, the narrower one wins; a preferred mask missing from one list never does."""
    nodes = list(range(8))
    none_preferred = [{f"r{i}": [TopologyHint(z, False) for z in range(1, 256)]} for i in range(3)]
    result = merge_hints("best-effort", none_preferred, nodes)
    assert result.hint == TopologyHint(0b1, False)
    assert result.best_non_preferred == 1
    shared = [{f"r{i}": [TopologyHint(z, z in (0b10100000, 0b1110) or (i > 0 and z == 0b1)) for z in range(1, 256)]}
              for i in range(3)]
    result = merge_hints("restricted", shared, nodes)
    assert result.hint == TopologyHint(0b10100000, True)
    assert result.admit is True


def test_16_nodes_capacity_lists() -> None:
    """Capacity-generated CPU and device lists on 16 NUMA nodes: the kubelet refuses the machine
    unless max-allowable-numa-nodes is raised; truncated lists match the reference exactly, and the
    full lists (tens of thousands of hints each) give a sound answer."""
    rnd = random.Random(11)
    nodes = list(range(16))
    cpu = capacity_hints([rnd.randrange(0, 9) for _ in range(16)], [8] * 16, 12)
    gpu = capacity_hints([rnd.randrange(0, 2) for _ in range(16)], [1] * 16, 1)
    providers = [{"gpu": gpu}, {"cpu": cpu}]
    try:
        merge_hints("best-effort", providers, nodes)
        raise AssertionError("16 NUMA nodes must need max-allowable-numa-nodes")
    except TopologyError as err:
        assert "more than 8 NUMA Nodes" in str(err)
    options = {"max-allowable-numa-nodes": "16"}
    picked = [{"gpu": rnd.sample(gpu, 40)}, {"cpu": rnd.sample(cpu, 40)}, {"memory": rnd.sample(cpu, 3)}]
    with search_mode("transforms"):
        for policy in ("best-effort", "restricted", "single-numa-node"):
            _same(policy, picked, nodes, options, None)
    result = merge_hints("best-effort", providers, nodes, options)
    assert result.hint.affinity and result.hint.affinity < 1 << 16
    assert result.best_non_preferred == max(min(h.affinity.bit_count() for h in lst) for lst in (gpu, cpu))
    witness = result.hint.affinity in {h.affinity for h in cpu} or result.hint.affinity in {h.affinity for h in gpu}
    assert witness  # capacity lists are closed under supersets, so the winner is offered by a list itself
