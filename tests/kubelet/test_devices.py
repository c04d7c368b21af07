"""Device Manager: hints, filterByAffinity, devicesToAllocate, per-node state; seed 003 examples."""

import pytest

from scheduler_core.errors import InsufficientResourcesError, RequestError
from scheduler_core.kubelet.devicemanager.devices import device_sort_key
from scheduler_core.kubelet.devicemanager.manager import DeviceManager, devices_to_allocate, filter_by_affinity
from scheduler_core.kubelet.devicemanager.topology_hints import (
    container_device_hints,
    device_topology_hints,
    pod_device_hints,
)
from scheduler_core.kubelet.topologymanager.hint import TopologyHint
from scheduler_core.model.bitmask import mask_of
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import Device, synthetic


def H(nodes, preferred):
    return TopologyHint(mask_of(nodes), preferred)


# -- seed 003 (Kubernetes 1.18 Topology Manager blog) -------------------------------------------------

def test_seed003_two_devices_split_across_numa_minimal_mask_is_preferred():
    """Request 2 when the only 2 devices sit on NUMA 0 and 1 of a 4-node machine:
    {0011: True}, {0111: False}, {1011: False}, {1111: False}."""
    devices = [Device("d0", "r", (0,)), Device("d1", "r", (1,))]
    hints = device_topology_hints([0, 1, 2, 3], devices, ["d0", "d1"], [], 2)
    assert hints == [TopologyHint(0b0011, True), TopologyHint(0b0111, False),
                     TopologyHint(0b1011, False), TopologyHint(0b1111, False)]


def test_seed003_two_numa_mask_not_preferred_when_a_single_node_could_hold_the_request():
    """Preferred follows capacity, not the free state: with two devices on NUMA 0 the 2-NUMA mask is
    never minimal, so when one of them is taken the only hint is {11: False}."""
    devices = [Device("a", "r", (0,)), Device("b", "r", (0,)), Device("c", "r", (1,))]
    assert device_topology_hints([0, 1], devices, ["a", "b", "c"], [], 2) == [H([0], True), H([0, 1], False)]
    assert device_topology_hints([0, 1], devices, ["b", "c"], [], 2) == [H([0, 1], False)]


def _blog_machine():
    return synthetic(1, 2, 4, 1, devices_per_numa={"gpu-vendor.com/gpu": 1, "nic-vendor.com/nic": 1})


def test_seed003_container0_and_container1_gpu_nic_hints():
    """Figure 1: GPU/NIC 0 on NUMA 0, GPU/NIC 1 on NUMA 1. Container0 sees both NUMA nodes
    preferred; after it took gpu0/nic0, Container1 sees only NUMA 1 preferred. (The blog lists the
    preferred hints; the kubelet also emits the non-preferred {11}, kept here as upstream does.)"""
    topo = _blog_machine()
    dm = DeviceManager.for_topology(topo)
    limits = {"cpu": 2000, "memory": 200 * 2**20, "gpu-vendor.com/gpu": 1, "nic-vendor.com/nic": 1}
    c0, c1 = Container("container0", limits, limits), Container("container1", limits, limits)
    pod = Pod("blog", [c0, c1])

    hints0 = dm.get_topology_hints(pod, c0)
    assert set(hints0) == {"gpu-vendor.com/gpu", "nic-vendor.com/nic"}
    for hints in hints0.values():
        assert [h for h in hints if h.preferred] == [H([0], True), H([1], True)]
        assert hints == [H([0], True), H([1], True), H([0, 1], False)]
    got0 = dm.allocate(pod, c0, mask_of([0])).devices
    assert got0 == {"gpu-vendor.com/gpu": ("gpu0",), "nic-vendor.com/nic": ("nic0",)}

    hints1 = dm.get_topology_hints(pod, c1)
    for hints in hints1.values():
        assert [h for h in hints if h.preferred] == [H([1], True)]
        assert hints == [H([1], True), H([0, 1], False)]
    got1 = dm.allocate(pod, c1, mask_of([1])).devices
    assert got1 == {"gpu-vendor.com/gpu": ("gpu1",), "nic-vendor.com/nic": ("nic1",)}
    # nothing left: a third container cannot be placed at all ([] = impossible)
    c2 = Container("container2", limits, limits)
    assert dm.get_topology_hints(Pod("other", [c2]), c2) == {"gpu-vendor.com/gpu": [], "nic-vendor.com/nic": []}


# -- hint provider three-state output ------------------------------------------------------------------

def test_resource_without_numa_information_gives_none():
    devices = [Device("a", "r", None), Device("b", "r", ())]
    assert container_device_hints([0, 1], devices, {"r": 1}) == {"r": None}
    assert pod_device_hints([0, 1], devices, {"r": 1}) == {"r": None}


def test_unregistered_resources_are_ignored_and_no_request_is_empty_map():
    devices = [Device("a", "r", (0,))]
    assert container_device_hints([0, 1], devices, {"other": 2}) == {}
    assert container_device_hints([0, 1], devices, {}) == {}


def test_unhealthy_and_in_use_devices_are_not_available():
    devices = [Device("a", "r", (0,), healthy=False), Device("b", "r", (1,)), Device("c", "r", (1,))]
    assert container_device_hints([0, 1], devices, {"r": 1}, in_use={"c"}) == {"r": [H([1], True), H([0, 1], False)]}
    assert container_device_hints([0, 1], devices, {"r": 2}, in_use={"c"}) == {"r": []}


def test_container_already_holding_devices_regenerates_from_them():
    devices = [Device("a", "r", (0,)), Device("b", "r", (1,))]
    got = container_device_hints([0, 1], devices, {"r": 1}, in_use={"b"}, allocated={"r": {"b"}})
    assert got == {"r": [H([1], True), H([0, 1], False)]}
    assert container_device_hints([0, 1], devices, {"r": 2}, in_use={"b"}, allocated={"r": {"b"}}) == {"r": []}


def test_reusable_devices_constrain_the_masks():
    devices = [Device("a", "r", (0,)), Device("b", "r", (1,)), Device("c", "r", (1,))]
    # a reusable device on NUMA 0 must lie in every mask
    assert device_topology_hints([0, 1], devices, ["b", "c"], ["a"], 2) == [H([0, 1], False)]
    # a reusable device without Topology is ignored; one with an empty node list rejects every mask
    devices += [Device("n", "r", None), Device("e", "r", ())]
    assert device_topology_hints([0, 1], devices, ["b", "c"], ["n"], 2) == [H([1], True), H([0, 1], False)]
    assert device_topology_hints([0, 1], devices, ["b", "c"], ["e"], 2) == []


def test_devices_without_topology_never_count_toward_a_mask():
    devices = [Device("a", "r", (0,)), Device("n1", "r", None), Device("n2", "r", None)]
    assert device_topology_hints([0, 1], devices, ["a", "n1", "n2"], [], 2) == []


def test_multi_numa_device_counts_in_every_mask_it_touches():
    devices = [Device("a", "r", (0, 1)), Device("b", "r", (1,))]
    assert device_topology_hints([0, 1], devices, ["a", "b"], [], 2) == [H([1], True), H([0, 1], False)]


def test_hints_depend_on_the_free_layout_not_on_device_ids():
    """Hints are remembered per (NUMA nodes, devices per NUMA mask, free per mask, reusable masks,
    request): another node with the same layout gets equal hints, a changed free set fresh ones, and
    changing a returned list changes nothing remembered."""
    first = [Device("a", "r", (0,)), Device("b", "r", (1,)), Device("c", "r", (1,))]
    other = [Device("x", "r", (0,)), Device("y", "r", (1,)), Device("z", "r", (1,))]
    got = device_topology_hints([0, 1], first, ["b", "c"], [], 2)
    assert got == [H([1], True), H([0, 1], False)]
    got.clear()
    assert device_topology_hints([0, 1], other, ["y", "z"], [], 2) == [H([1], True), H([0, 1], False)]
    assert device_topology_hints([0, 1], other, ["x", "z"], [], 2) == [H([0, 1], False)]
    assert device_topology_hints([0, 1], other, ["x", "z"], ["y"], 2) == [H([1], True), H([0, 1], False)]
    assert device_topology_hints([0, 1], other, ["x", "z"], ["y"], 3) == [H([0, 1], True)]


# -- bad input ------------------------------------------------------------------------------------------

def test_negative_request_is_rejected_with_the_value():
    devices = [Device("a", "r", (0,))]
    with pytest.raises(RequestError, match="-1"):
        device_topology_hints([0], devices, ["a"], [], -1)
    with pytest.raises(RequestError, match="-2"):
        container_device_hints([0], devices, {"r": -2})
    with pytest.raises(RequestError, match="-3"):
        devices_to_allocate("r", devices, -3)


def test_unknown_device_ids_are_rejected_by_name():
    devices = [Device("a", "r", (0,))]
    with pytest.raises(RequestError, match="'ghost'"):
        device_topology_hints([0], devices, ["a", "ghost"], [], 1)
    with pytest.raises(RequestError, match="'ghost2'"):
        filter_by_affinity(devices, ["ghost2"], 1)
    with pytest.raises(RequestError, match="'ghost3'"):
        devices_to_allocate("r", devices, 1, in_use=["ghost3"])
    with pytest.raises(RequestError, match="'ghost4'"):
        devices_to_allocate("r", devices, 1, reusable=["ghost4"])


def test_request_larger_than_the_machine():
    devices = [Device(f"d{i}", "r", (i % 2,)) for i in range(4)]
    # as a hint provider: impossible, not an exception (the merge turns [] into a rejection)
    assert device_topology_hints([0, 1], devices, [d.id for d in devices], [], 5) == []
    assert container_device_hints([0, 1], devices, {"r": 5}) == {"r": []}
    with pytest.raises(InsufficientResourcesError,
                       match=r"^requested number of devices unavailable for r\. Requested: 5, Available: 4$"):
        devices_to_allocate("r", devices, 5, affinity=mask_of([0]))


def test_bad_affinity_values():
    devices = [Device("a", "r", (0,))]
    with pytest.raises(RequestError, match="-4"):
        filter_by_affinity(devices, ["a"], -4)
    with pytest.raises(RequestError, match="64"):
        filter_by_affinity(devices, ["a"], [64])


# -- devicesToAllocate ----------------------------------------------------------------------------------

def test_allocation_error_texts():
    devices = [Device("a", "r", (0,)), Device("b", "r", (1,))]
    with pytest.raises(RequestError, match=r"^cannot allocate unregistered device gpu$"):
        devices_to_allocate("gpu", [], 1)
    sick = [Device("a", "r", (0,), healthy=False)]
    with pytest.raises(InsufficientResourcesError,
                       match=r"^no healthy devices present; cannot allocate unhealthy devices r$"):
        devices_to_allocate("r", sick, 1)
    half = [Device("a", "r", (0,), healthy=False), Device("b", "r", (1,))]
    with pytest.raises(InsufficientResourcesError, match=r"^previously allocated devices are no longer healthy"):
        devices_to_allocate("r", half, 1, already_allocated=["a"])
    with pytest.raises(RequestError,
                       match=r'^pod "uid1" container "c" changed request for resource "r" from 1 to 2$'):
        devices_to_allocate("r", devices, 2, already_allocated=["a"], pod_uid="uid1", container="c")
    assert devices_to_allocate("r", devices, 1, already_allocated=["a"]) == frozenset()


def test_allocation_prefers_aligned_then_unaligned_then_no_affinity():
    devices = [Device("n", "r", None), Device("u1", "r", (1,)), Device("a1", "r", (0,)), Device("a2", "r", (0,))]
    assert devices_to_allocate("r", devices, 2, affinity=mask_of([0])) == {"a1", "a2"}
    assert devices_to_allocate("r", devices, 3, affinity=mask_of([0])) == {"a1", "a2", "u1"}
    assert devices_to_allocate("r", devices, 4, affinity=mask_of([0])) == {"a1", "a2", "u1", "n"}
    # nil hint: no alignment, the choice is the deterministic natural id order
    assert devices_to_allocate("r", devices, 1, affinity=None) == {"a1"}


def test_allocation_takes_reusable_devices_first_whatever_the_hint():
    devices = [Device("a", "r", (0,)), Device("b", "r", (1,)), Device("c", "r", (1,))]
    got = devices_to_allocate("r", devices, 2, in_use=["a"], reusable=["a"], affinity=mask_of([1]))
    assert got == {"a", "b"}


def test_preferred_allocation_when_aligned_are_not_enough():
    """Branch 8: all aligned devices first, then the plugin's choice among the free ones."""
    devices = [Device(f"d{i}", "r", (i % 2,)) for i in range(6)]
    calls = []

    def plugin(available, must_include, size):
        calls.append((set(available), set(must_include), size))
        return ["d5", "bogus"]

    got = devices_to_allocate("r", devices, 4, affinity=mask_of([0]), preferred_allocation=plugin)
    assert got == {"d0", "d2", "d4", "d5"}
    assert calls == [({f"d{i}" for i in range(6)}, {"d0", "d2", "d4"}, 4)]


def test_device_ids_sort_naturally():
    assert sorted(["Dev10", "Dev2", "Dev1", "a", "Dev02x"], key=device_sort_key)[:3] == ["Dev1", "Dev2", "Dev02x"]


# -- per-node state, init containers and pod scope (ENGINE.md §2.5) ----------------------------------------

def test_init_container_devices_are_reused_by_app_but_not_sidecar_devices():
    topo = synthetic(1, 2, 2, 1, devices_per_numa={"gpu": 2})
    dm = DeviceManager.for_topology(topo)
    init = Container("init", {"gpu": 2}, {"gpu": 2}, "init")
    side = Container("side", {"gpu": 1}, {"gpu": 1}, "sidecar")
    app = Container("app", {"gpu": 2}, {"gpu": 2})
    pod = Pod("p", [app], [init, side])
    assert dm.allocate(pod, init, mask_of([0])).devices["gpu"] == ("gpu0", "gpu1")
    assert dm.reuse[pod.uid]["gpu"] == {"gpu0", "gpu1"}
    # the sidecar takes a reusable device first, and keeps it: it leaves the reusable set
    assert dm.allocate(pod, side, mask_of([0])).devices["gpu"] == ("gpu0",)
    assert dm.reuse[pod.uid]["gpu"] == {"gpu1"}
    # the app reuses what is left, then takes one free device (NUMA 1 is all that is free)
    assert dm.allocate(pod, app, mask_of([0])).devices["gpu"] == ("gpu1", "gpu2")
    assert dm.reuse[pod.uid]["gpu"] == set()
    assert dm.in_use("gpu") == {"gpu0", "gpu1", "gpu2"}
    # allocating again for a container that holds its devices is a no-op
    assert dm.allocate(pod, app, mask_of([0])).devices["gpu"] == ("gpu1", "gpu2")


def test_reuse_state_is_kept_for_one_pod_only_and_pod_removal_frees_devices():
    topo = synthetic(1, 2, 2, 1, devices_per_numa={"gpu": 1})
    dm = DeviceManager.for_topology(topo)
    init = Container("init", {"gpu": 1}, {"gpu": 1}, "init")
    p1 = Pod("p1", [Container("app", {"gpu": 1}, {"gpu": 1})], [init])
    dm.allocate(p1, init, None)
    assert dm.reuse[p1.uid]["gpu"] == {"gpu0"}
    c = Container("c", {"gpu": 1}, {"gpu": 1})
    p2 = Pod("p2", [c])
    dm.allocate(p2, c, None)
    assert set(dm.reuse) == {p2.uid}
    dm.remove_pod(p1.uid)
    assert dm.in_use("gpu") == {"gpu1"}


def test_pod_scope_hints_use_the_pod_level_request():
    topo = synthetic(1, 2, 2, 1, devices_per_numa={"gpu": 2})
    dm = DeviceManager.for_topology(topo)
    apps = [Container(f"a{i}", {"gpu": 1}, {"gpu": 1}) for i in range(2)]
    init = Container("i", {"gpu": 3}, {"gpu": 3}, "init")
    pod = Pod("p", apps, [init])
    # pod level = max(1 + 1, 3) = 3: no single NUMA node has 3 GPUs
    assert dm.get_pod_topology_hints(pod) == {"gpu": [H([0, 1], True)]}
    dm.allocate(pod, apps[0], mask_of([0]))
    # the pod already holds 1 device but asks for 3 in total: impossible
    assert dm.get_pod_topology_hints(pod) == {"gpu": []}


def test_flat_in_use_set_spans_resources():
    devices = [Device("g0", "gpu", (0,)), Device("g1", "gpu", (1,)), Device("n0", "nic", (0,))]
    got = container_device_hints([0, 1], devices, {"gpu": 1, "nic": 1}, in_use={"g0", "n0"})
    assert got == {"gpu": [H([1], True), H([0, 1], False)], "nic": []}
    with pytest.raises(RequestError, match="'zz'"):
        container_device_hints([0, 1], devices, {"gpu": 1}, in_use={"zz"})


def test_the_shortfall_counts_what_is_left_after_the_reusable_devices():
    devices = [Device(f"g{i}", "gpu", (0,)) for i in range(3)]
    with pytest.raises(InsufficientResourcesError, match="Requested: 2, Available: 1"):
        devices_to_allocate("gpu", devices, 3, in_use={"g0", "g1"}, reusable={"g0"})
