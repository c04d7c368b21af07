"""`bits_of` by table gives every set bit, ascending, for masks of any width."""

from hypothesis import given
from hypothesis import strategies as st

from scheduler_core.model.bitmask import bits_of


@given(st.integers(0, (1 << 1024) - 1))
def test_bits_of_lists_every_set_bit_in_order(mask):
    assert bits_of(mask) == [i for i in range(mask.bit_length()) if mask >> i & 1]


def test_bits_of_returns_a_fresh_list():
    first = bits_of(0b101)
    first.append(9)
    assert bits_of(0b101) == [0, 2]
    assert bits_of(0) == [] and bits_of(1 << 700) == [700]
