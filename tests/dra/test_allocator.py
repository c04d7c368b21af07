"""The allocator beyond upstream's table: the list-matching bugs upstream fixed (kubernetes#140300 and the
distinctAttribute regression kubernetes#140727 covers), list-type attributes, CEL selectors on attributes of
every type, and upstream's error words for a selector that fails."""

from __future__ import annotations

import pytest

from scheduler_core.dra.allocator import AllocationError, Allocator
from scheduler_core.dra.objects import read_dra

from .objects import claim, device_class, exactly, resource_slice

DRIVER = "driver-a"


def _devices(values: dict[str, object], kind: str = "ints") -> list[dict]:
    return [{"name": name, "attributes": {"attr": {kind: value}}} for name, value in values.items()]


def _allocate(devices: list[dict], claim_obj: dict, *extra_classes: dict, allocated=frozenset()):
    state = read_dra([device_class("class-a", f'device.driver == "{DRIVER}"'), *extra_classes,
                      resource_slice("s", DRIVER, "n1", devices, pool="p"), claim_obj])
    (the_claim,) = state.claims.values()
    result = Allocator(state.classes, state.slices).allocate("n1", [the_claim], allocated)
    return None if result is None else [r.device for r in result[0]]


def test_match_attribute_restores_the_intersection_when_it_backtracks_kubernetes_140300() -> None:
    # the case: dev1=[1,2], dev2=[1], dev3=[2], dev4=[2], three devices whose lists must intersect;
    # dev1+dev2 narrows the intersection to {1}, a dead end: it must widen to {1,2} again when dev2 goes back
    devices = _devices({"dev1": [1, 2], "dev2": [1], "dev3": [2], "dev4": [2]})
    got = _allocate(devices, claim("c", [exactly("r", "class-a", 3)],
                                   constraints=[{"matchAttribute": f"{DRIVER}/attr"}]))
    assert got == ["dev1", "dev3", "dev4"]


def test_distinct_attribute_compares_every_device_of_a_request_not_only_the_last() -> None:
    # count 3 over red, blue, red, green: the third device must differ from the first too (the regression
    # upstream's distinctAttribute tests guard since kubernetes#140727)
    devices = _devices({"d0": "red", "d1": "blue", "d2": "red", "d3": "green"}, "strings")
    for d in devices:
        d["attributes"]["attr"] = {"string": d["attributes"]["attr"]["strings"]}
    got = _allocate(devices, claim("c", [exactly("r", "class-a", 3)],
                                   constraints=[{"distinctAttribute": f"{DRIVER}/attr"}]))
    assert got == ["d0", "d1", "d3"]


def test_distinct_list_attributes_must_be_pairwise_disjoint_and_backtrack() -> None:
    devices = _devices({"d0": [0, 1], "d1": [1, 2], "d2": [2, 3], "d3": [4]})
    got = _allocate(devices, claim("c", [exactly("r", "class-a", 3)],
                                   constraints=[{"distinctAttribute": f"{DRIVER}/attr"}]))
    assert got == ["d0", "d2", "d3"]


def test_a_scalar_matches_a_list_holding_it_but_not_a_string_of_the_same_text() -> None:
    devices = [{"name": "d0", "attributes": {"attr": {"int": 1}}},
               {"name": "d1", "attributes": {"attr": {"ints": [0, 1]}}},
               {"name": "d2", "attributes": {"attr": {"string": "1"}}}]
    constraint = [{"matchAttribute": f"{DRIVER}/attr"}]
    assert _allocate(devices, claim("c", [exactly("r", "class-a", 2)], constraints=constraint)) == ["d0", "d1"]
    assert _allocate(devices[::2], claim("c", [exactly("r", "class-a", 2)], constraints=constraint)) is None


def test_selectors_see_attributes_capacity_and_versions_as_upstream_gives_them() -> None:
    devices = [{"name": "small", "attributes": {"model": {"string": "A"}, "fw": {"version": "1.2.0"}},
                "capacity": {"memory": {"value": "16Gi"}}},
               {"name": "big", "attributes": {"model": {"string": "A"}, "fw": {"version": "1.10.0"},
                                              "other.io/numa": {"ints": [0, 1]}},
                "capacity": {"memory": {"value": "80Gi"}}}]
    sel = [f'device.attributes["{DRIVER}"].model == "A"',
           f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("32Gi"))',
           f'device.attributes["{DRIVER}"].fw.isGreaterThan(semver("1.9.0"))',  # 1.10.0 > 1.9.0 as versions
           'device.attributes["other.io"].numa.includes(1)',
           '!("numa" in device.attributes["unknown.io"])']
    assert _allocate(devices, claim("c", [exactly("r", "class-a", 1, *sel)])) == ["big"]


def test_a_selector_that_fails_is_upstreams_cel_runtime_error() -> None:
    devices = [{"name": "d0", "attributes": {}}]
    bad = claim("c", [exactly("r", "class-a", 1, f'device.attributes["{DRIVER}"].missing == 1')])
    with pytest.raises(AllocationError, match=r"claim ml/c: selector #0 on device driver-a/p/d0: CEL runtime error"):
        _allocate(devices, bad)
    with pytest.raises(AllocationError, match=r"claim ml/c: selector #0: CEL compilation failed"):
        _allocate(devices, claim("c", [exactly("r", "class-a", 1, "device.driver ==")]))
    broken = device_class("broken", "device.driver")
    with pytest.raises(AllocationError, match=r"class broken: selector #0 on device .* could not be converted to bool"):
        _allocate(devices, claim("c", [exactly("r", "broken", 1)]), broken)


def test_devices_other_claims_hold_are_skipped() -> None:
    devices = _devices({"d0": [0], "d1": [0]})
    assert _allocate(devices, claim("c", [exactly("r", "class-a", 1)]), allocated={(DRIVER, "p", "d0")}) == ["d1"]
