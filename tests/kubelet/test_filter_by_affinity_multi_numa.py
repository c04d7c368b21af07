"""The kubelet filterByAffinity bug (fixed upstream by PR #101893).

A device attached to several NUMA nodes (dev1 on NUMA {1, 2}) must be classed as aligned with a
hint of NUMA {2} whatever order the devices, the available ids or the NUMA groups come in. The
buggy variants are reimplemented here only, as counter-examples that the test shows misclassify.
"""

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.kubelet.devicemanager.devices import NO_TOPOLOGY_NODE
from scheduler_core.kubelet.devicemanager.manager import (
    affinity_node_order,
    devices_to_allocate,
    filter_by_affinity,
)
from scheduler_core.model.bitmask import mask_of
from scheduler_core.model.topology import Device

HINT = mask_of([2])


def seed_devices(variant: bool) -> list[Device]:
    devs = [Device("dev1", "r", (1, 2)), Device("dev2", "r", (1,))]
    if variant:
        devs += [Device("dev3", "r", (2,)), Device("dev4", "r", (2,))]
    return devs


# -- counter-examples (the historical code, reimplemented only here) ----------------------------------

def _per_node(devices, available):
    per_node = {}
    by_id = {d.id: d for d in devices}
    for i in available:
        for node in by_id[i].numa or (NO_TOPOLOGY_NODE,):
            per_node.setdefault(node, set()).add(i)
    return per_node


def _go_insertion_sort(items, less):
    """Go's sort.Slice on short slices is an insertion sort calling less(i, j) with positions."""
    items = list(items)
    for i in range(1, len(items)):
        j = i
        while j > 0 and less(items, j, j - 1):
            items[j], items[j - 1] = items[j - 1], items[j]
            j -= 1
    return items


def _classify(order, per_node, available, affinity):
    aligned, unaligned, none = set(), set(), set()
    for i in available:
        for n in order:
            if i in per_node[n]:
                if n == NO_TOPOLOGY_NODE:
                    none.add(i)
                elif (affinity >> n) & 1:
                    aligned.add(i)
                else:
                    unaligned.add(i)
                break
    return aligned, unaligned, none


def buggy_positions(devices, available, affinity, map_order):
    """Pre-#101893: nodes in map iteration order, sorted with a comparator that looks the per-node
    map up by slice *positions* (perNodeDevices[i]) instead of node ids (perNodeDevices[nodes[i]])."""
    per_node = _per_node(devices, available)
    nodes = [n for n in map_order if n in per_node]

    def less(_items, i, j):
        return len(per_node.get(i, ())) < len(per_node.get(j, ()))

    return _classify(_go_insertion_sort(nodes, less), per_node, available, affinity)


def comparator_only_fixed(devices, available, affinity, map_order):
    """Fixing only the index bug (ascending device count, no hint-first group) is not enough."""
    per_node = _per_node(devices, available)
    nodes = [n for n in map_order if n in per_node]

    def less(items, i, j):
        return len(per_node[items[i]]) < len(per_node[items[j]])

    return _classify(_go_insertion_sort(nodes, less), per_node, available, affinity)


# -- the fixed engine ---------------------------------------------------------------------------------

def test_seed004_dev1_aligned_under_every_device_and_available_order():
    for variant in (False, True):
        devices = seed_devices(variant)
        ids = [d.id for d in devices]
        for dev_perm in itertools.permutations(devices):
            for avail_perm in itertools.permutations(ids):
                aligned, unaligned, none = filter_by_affinity(list(dev_perm), list(avail_perm), HINT)
                assert "dev1" in aligned
                assert unaligned == {"dev2"}
                assert not none
                assert aligned == (set(ids) - {"dev2"})


def test_seed004_fixed_node_order_puts_hint_nodes_first():
    per_node = {1: {"dev1", "dev2"}, 2: {"dev1", "dev3", "dev4"}, NO_TOPOLOGY_NODE: {"x"}, 0: {"y"}}
    assert affinity_node_order(per_node, HINT) == [2, 0, 1, NO_TOPOLOGY_NODE]
    # inside a group: ascending by device count, then id
    per_node = {0: {"a", "b"}, 1: {"c"}, 2: {"d", "e", "f"}, 3: {"g"}}
    assert affinity_node_order(per_node, mask_of([0, 2])) == [0, 2, 1, 3]


def test_seed004_buggy_comparator_misclassifies_in_some_order():
    """The counter-example: with the position-indexed comparator, some map iteration order classes
    dev1 (NUMA {1,2}) as unaligned for hint {2}; the fixed code never does."""
    for variant in (False, True):
        devices = seed_devices(variant)
        ids = [d.id for d in devices]
        outcomes = {("dev1" in buggy_positions(devices, ids, HINT, order)[0])
                    for order in itertools.permutations([1, 2])}
        assert outcomes == {True, False}
        assert "dev1" in filter_by_affinity(devices, ids, HINT)[0]


def test_seed004_count_only_comparator_still_wrong_for_variant():
    """With dev3, dev4 on NUMA 2, NUMA 1 has fewer devices, so ascending count puts it first and
    dev1 lands in the unaligned set under every map order: only the hint-first rule fixes it."""
    devices = seed_devices(True)
    ids = [d.id for d in devices]
    for order in itertools.permutations([1, 2]):
        aligned, unaligned, _ = comparator_only_fixed(devices, ids, HINT, order)
        assert "dev1" in unaligned and "dev1" not in aligned


def test_seed004_allocation_takes_dev1_for_hint_2():
    """Request 1 device with hint NUMA {2}: only dev1 is aligned, so it is the one allocated."""
    devices = seed_devices(False)
    for perm in itertools.permutations(devices):
        got = devices_to_allocate("r", list(perm), 1, affinity=HINT)
        assert got == {"dev1"}
    # variant: any of dev1, dev3, dev4 is aligned; dev2 never is
    devices = seed_devices(True)
    for perm in itertools.permutations(devices):
        got = devices_to_allocate("r", list(perm), 3, affinity=HINT)
        assert got == {"dev1", "dev3", "dev4"}


_numa = st.one_of(st.none(), st.just(()),
                  st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True).map(tuple))


@settings(max_examples=300, deadline=None)
@given(extra=st.lists(_numa, max_size=10), variant=st.booleans(), seed=st.integers(0, 2**32 - 1),
       hint=st.sets(st.integers(0, 5), min_size=1).map(mask_of), with_seed_hint=st.booleans())
def test_seed004_shuffled_with_random_extra_devices(extra, variant, seed, hint, with_seed_hint):
    if with_seed_hint:
        hint |= HINT
    devices = seed_devices(variant) + [Device(f"x{i}", "r", numa) for i, numa in enumerate(extra)]
    rng = random.Random(seed)
    rng.shuffle(devices)
    available = [d.id for d in devices if rng.random() < 0.8 or d.id == "dev1"]
    rng.shuffle(available)
    aligned, unaligned, none = filter_by_affinity(devices, available, hint)
    by_id = {d.id: d for d in devices}
    assert aligned | unaligned | none == set(available)
    assert not (aligned & unaligned or aligned & none or unaligned & none)
    for i in available:
        numa = by_id[i].numa
        if not numa:
            assert i in none
        elif any((hint >> n) & 1 for n in numa):
            assert i in aligned
        else:
            assert i in unaligned
    if hint & HINT:
        assert "dev1" in aligned
