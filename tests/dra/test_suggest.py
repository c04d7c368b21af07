"""The claim change that aligns a misaligned claim, verified by the allocator."""

from __future__ import annotations

from scheduler_core.dra.alignment import check
from scheduler_core.dra.objects import read_dra
from scheduler_core.dra.suggest import suggest

from .objects import GPU_DRIVER, claim, device, device_class, exactly, resource_slice

STD = "resource.kubernetes.io/numaNode"
CLASSES = [device_class("gpu", f'device.driver == "{GPU_DRIVER}"'), device_class("nic", 'device.driver == "nic.io"')]


def _state(gpus: list[int], nics: list[int], nic_attribute: str = STD, allocated=None):
    return read_dra([*CLASSES,
                     resource_slice("g", GPU_DRIVER, "n1", [device(f"gpu-{i}", **{STD: n})
                                                            for i, n in enumerate(gpus)]),
                     resource_slice("e", "nic.io", "n1", [device(f"eth{i}", **{nic_attribute: n})
                                                          for i, n in enumerate(nics)]),
                     claim("train", [exactly("gpu", "gpu"), exactly("nic", "nic")], results=allocated)])


def test_a_match_attribute_constraint_on_the_standard_attribute_aligns_the_devices() -> None:
    state = _state([0, 1], [1], allocated=[("gpu", GPU_DRIVER, "n1", "gpu-0"), ("nic", "nic.io", "n1", "eth0")])
    the_claim = state.claims[("ml", "train")]
    before = [state.device(r.key) for r in the_claim.allocation]
    assert check(before, frozenset(), frozenset()).kinds == ("nic-gpu",)
    got = suggest(the_claim, state, "n1")
    assert got.found
    assert got.to_dict()["constraint"] == {"requests": ["gpu", "nic"], "matchAttribute": STD}
    assert [r.device for r in got.devices] == ["gpu-1", "eth0"]
    assert got.claim is not None and got.claim.constraints[-1].match_attribute == STD


def test_pinned_cpus_add_a_selector_keeping_the_devices_on_their_numa_node() -> None:
    state = _state([0, 1], [0, 1])
    got = suggest(state.claims[("ml", "train")], state, "n1", cpu_numa=frozenset({1}))
    assert got.found and got.selectors == ('device.attributes["resource.kubernetes.io"].numaNode == 1',)
    assert [r.device for r in got.devices] == ["gpu-1", "eth1"]


def test_no_aligned_allocation_on_the_node_is_said_not_invented() -> None:
    state = _state([0], [1])
    got = suggest(state.claims[("ml", "train")], state, "n1")
    assert not got.found and "no allocation of the changed claim exists on n1" in got.detail


def test_drivers_naming_numa_differently_cannot_be_matched() -> None:
    state = _state([0], [0], nic_attribute="numa")
    got = suggest(state.claims[("ml", "train")], state, "n1")
    assert (got.found, got.claim) == (False, None)
    assert "no common NUMA attribute" in got.detail


def test_a_shared_allocator_and_held_devices_give_the_fresh_answer() -> None:
    """An import passes one allocator for all its claims and each node's held devices: the answer is the one a
    fresh allocator gives, and the devices passed as held are the ones kept from the change."""
    from scheduler_core.dra.allocator import Allocator

    state = _state([0, 1, 1], [1], allocated=[("gpu", GPU_DRIVER, "n1", "gpu-0"), ("nic", "nic.io", "n1", "eth0")])
    state.claims.update(read_dra([claim("other", [exactly("gpu", "gpu")],
                                        results=[("gpu", GPU_DRIVER, "n1", "gpu-1")])]).claims)
    the_claim = state.claims[("ml", "train")]
    fresh = suggest(the_claim, state, "n1")
    assert [r.device for r in fresh.devices] == ["gpu-2", "eth0"]  # gpu-1 is the other claim's
    allocator = Allocator(state.classes, state.slices)
    held = [(GPU_DRIVER, "n1", "gpu-0"), ("nic.io", "n1", "eth0"), (GPU_DRIVER, "n1", "gpu-1")]
    for _ in range(2):  # the second time on the verdicts the first kept
        assert suggest(the_claim, state, "n1", allocator=allocator, held=held) == fresh
    assert [r.device for r in suggest(the_claim, state, "n1", allocator=allocator, held=[]).devices] == [
        "gpu-1", "eth0"]
