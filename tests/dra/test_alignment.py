"""The alignment check: kinds named from the two resources, unknown NUMA nodes making none."""

from __future__ import annotations

from scheduler_core.dra.alignment import check
from scheduler_core.dra.model import Device


def dev(name: str, kind: str, numa: int | None) -> Device:
    source = "attribute drv/numa" if numa is not None else "unknown"
    return Device("drv", "pool", name, "n1", {}, {}, kind, numa, source)


def test_no_devices_is_aligned_with_no_kinds() -> None:
    result = check([], frozenset({0}), frozenset({0}))
    assert (result.aligned, result.kinds, result.to_dict()) == (True, (), {"aligned": True, "kinds": []})


def test_devices_on_the_pinned_numa_nodes_are_aligned() -> None:
    assert check([dev("g", "gpu", 1), dev("e", "nic", 1)], frozenset({1}), frozenset({1})).aligned


def test_each_pair_of_resources_on_different_numa_nodes_is_a_kind() -> None:
    result = check([dev("g", "gpu", 0), dev("e", "nic", 1)], frozenset({0}), frozenset({0, 1}))
    assert result.kinds == ("nic-cpu", "nic-gpu")
    assert "nic drv/e on NUMA 1, cpu on NUMA 0" in result.detail
    assert check([dev("g0", "gpu", 0), dev("g1", "gpu", 1)], frozenset(), frozenset()).kinds == ("gpu-gpu",)
    assert check([dev("g", "gpu", 1)], frozenset({0}), frozenset({0})).kinds == ("gpu-cpu", "gpu-memory")


def test_a_device_of_unknown_numa_makes_no_kind_and_says_so() -> None:
    result = check([dev("g", "gpu", None), dev("e", "nic", 0)], frozenset({0}), frozenset({0}))
    assert (result.aligned, result.kinds) == (True, ())
    assert "gpu drv/g: NUMA node unknown, not checked" in result.detail


def test_nothing_pinned_checks_only_the_devices_against_each_other() -> None:
    assert check([dev("g", "gpu", 1)], frozenset(), frozenset()).aligned
