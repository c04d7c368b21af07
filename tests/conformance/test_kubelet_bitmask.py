"""Every kubelet BitMask vector (ENGINE.md §2.1) through the engine's int functions
(scheduler_core.model.bitmask) and the kubelet's `BitMask` API over them (bitmask_api.py)."""

from functools import reduce

import pytest

from scheduler_core.model.bitmask import (
    BitMaskError,
    bits_of,
    count,
    is_narrower,
    iterate_masks,
    mask_of,
    mask_string,
)
from tests.conformance.bitmask_api import BitMask, and_masks, or_masks
from tests.conftest import load_vectors

CASES = load_vectors("kubelet_bitmask")["cases"]


def _check_mask(expected: dict, mask: BitMask) -> None:
    if "string" in expected:
        assert str(mask) == expected["string"]
        assert mask_string(mask.value) == expected["string"]
    if "bits" in expected:
        assert mask.get_bits() == expected["bits"]
        assert bits_of(mask.value) == expected["bits"]
    if "count" in expected:
        assert mask.count() == expected["count"]
        assert count(mask.value) == expected["count"]


def _mutate(case: dict, method: str) -> None:
    inp, exp = case["input"], case["expected"]
    mask = BitMask(*inp["initial"])
    before = mask.value
    if exp["error"]:
        with pytest.raises(BitMaskError, match="0-63"):
            getattr(mask, method)(*inp["bits"])
        assert mask.value == before, "a failed Add/Remove must leave the mask unchanged"
        with pytest.raises(BitMaskError):
            mask_of(inp["bits"])
    else:
        getattr(mask, method)(*inp["bits"])
        other = mask_of(inp["bits"])
        assert (before | other if method == "add" else before & ~other) == mask.value
    _check_mask(exp, mask)


def _run(case: dict) -> None:
    op, inp, exp = case["op"], case["input"], case["expected"]
    if op == "new_empty":
        _check_mask(exp, BitMask())
    elif op == "new":
        if exp.get("error"):
            with pytest.raises(BitMaskError, match="bit number must be in range 0-63"):
                BitMask(*inp["bits"])
            with pytest.raises(BitMaskError):
                mask_of(inp["bits"])
        else:
            _check_mask(exp, BitMask(*inp["bits"]))
            assert mask_of(inp["bits"]) == BitMask(*inp["bits"]).value
    elif op in ("add", "remove"):
        _mutate(case, op)
    elif op in ("and", "or"):
        masks = [BitMask(*m) for m in inp["masks"]]
        first_before = masks[0].value
        result = (and_masks if op == "and" else or_masks)(masks[0], *masks)
        assert masks[0].value == first_before, "package-level And/Or must not modify the first mask"
        ints = [mask_of(m) for m in inp["masks"]]
        expected_int = reduce((lambda a, b: a & b) if op == "and" else (lambda a, b: a | b), ints)
        assert result.value == expected_int
        _check_mask(exp, result)
    elif op in ("clear", "fill"):
        mask = BitMask(*inp["initial"])
        getattr(mask, op)()
        _check_mask(exp, mask)
    elif op == "is_empty":
        assert BitMask(*inp["mask"]).is_empty() is exp["result"]
        assert (mask_of(inp["mask"]) == 0) is exp["result"]
    elif op == "is_set":
        assert BitMask(*inp["mask"]).is_set(inp["bit"]) is exp["result"]
    elif op == "any_set":
        assert BitMask(*inp["mask"]).any_set(inp["bits"]) is exp["result"]
    elif op == "is_equal":
        assert BitMask(*inp["a"]).is_equal(BitMask(*inp["b"])) is exp["result"]
        assert (mask_of(inp["a"]) == mask_of(inp["b"])) is exp["result"]
    elif op == "count":
        assert BitMask(*inp["mask"]).count() == exp["result"]
        assert count(mask_of(inp["mask"])) == exp["result"]
    elif op == "get_bits":
        assert BitMask(*inp["mask"]).get_bits() == exp["result"]
        assert bits_of(mask_of(inp["mask"])) == exp["result"]
    elif op in ("is_narrower_than", "is_less_than", "is_greater_than"):
        a, b = BitMask(*inp["a"]), BitMask(*inp["b"])
        assert getattr(a, op)(b) is exp["result"]
        ia, ib = a.value, b.value
        as_int = {"is_narrower_than": is_narrower(ia, ib), "is_less_than": ia < ib, "is_greater_than": ia > ib}
        assert as_int[op] is exp["result"]
    elif op == "iterate_count":
        assert sum(1 for _ in iterate_masks(inp["bits"])) == exp["result"]
    elif op == "iterate_order":
        assert [bits_of(m) for m in iterate_masks(inp["bits"])] == exp["result"]
    elif op == "string":
        assert str(BitMask(*inp["mask"])) == exp["result"]
        assert mask_string(mask_of(inp["mask"])) == exp["result"]
    else:
        raise AssertionError(f"vector {case['id']} has an op this test does not know: {op!r}")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bitmask_vector(case: dict) -> None:
    _run(case)


def test_every_op_of_the_schema_is_covered() -> None:
    ops = set(load_vectors("kubelet_bitmask")["schema"]["ops"])
    assert {c["op"] for c in CASES} <= ops
