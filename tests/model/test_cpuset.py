"""CPUSet: Linux list format in and out, set algebra, and hostile input."""

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_core import CPUSet, CPUSetError


@pytest.mark.parametrize(("text", "ids"), [
    ("", []),
    ("0", [0]),
    ("0-3", [0, 1, 2, 3]),
    ("0-3,8-11", [0, 1, 2, 3, 8, 9, 10, 11]),
    ("5,1,3", [1, 3, 5]),
    (" 2 , 4-5 ", [2, 4, 5]),
    ("0-6:2", [0, 2, 4, 6]),
    ("1-62:30", [1, 31, 61]),
])
def test_parse(text, ids):
    assert list(CPUSet.parse(text)) == ids


@pytest.mark.parametrize(("ids", "text"), [
    ([], ""), ([3], "3"), ([0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"), ([1, 3], "1,3"),
])
def test_str(ids, text):
    assert str(CPUSet(ids)) == text


@given(st.sets(st.integers(0, 300)))
def test_round_trip(ids):
    cs = CPUSet(ids)
    assert CPUSet.parse(str(cs)) == cs
    # canonical: maximal runs, a range only for two or more CPUs, a gap between parts
    bounds = [tuple(map(int, part.split("-"))) for part in str(cs).split(",") if part]
    assert all(len(b) == 1 or b[0] < b[1] for b in bounds)
    assert all(b[0] >= a[-1] + 2 for a, b in pairwise(bounds))
    assert len(cs) == len(ids)
    assert set(cs) == ids


def test_algebra():
    a, b = CPUSet.parse("0-3"), CPUSet.parse("2-5")
    assert str(a | b) == "0-5"
    assert str(a & b) == "2-3"
    assert str(a - b) == "0-1"
    assert CPUSet.parse("1-2") <= a
    assert not (b <= a)
    assert 3 in a and 4 not in a and -1 not in a


@pytest.mark.parametrize(("text", "needle"), [
    ("3-1", "reversed"),
    ("0-99999999", "maximum"),
    ("a", "'a'"),
    ("1,,2", "empty element"),
    ("-1", "''"),
    ("0-4:0", "stride"),
    ("70000", "maximum"),
])
def test_bad_input_names_the_problem(text, needle):
    with pytest.raises(CPUSetError) as err:
        CPUSet.parse(text)
    assert needle in str(err.value)


def test_bad_ids_in_constructor():
    with pytest.raises(CPUSetError, match="negative"):
        CPUSet([1, -2])
    with pytest.raises(CPUSetError, match="integer"):
        CPUSet([1.5])


def test_immutable():
    cs = CPUSet([1])
    with pytest.raises(AttributeError):
        cs.mask = 3
