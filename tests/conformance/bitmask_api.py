"""The kubelet's mutable `BitMask` type (64 bits, all-or-nothing Add/Remove) with its method names, on
top of the engine's int functions: the adapter that runs the kubelet's BitMask vectors against its API."""

from __future__ import annotations

from collections.abc import Iterable

from scheduler_core.model.bitmask import FULL, MASK_BITS, bits_of, is_narrower, mask_of, mask_string


class BitMask:
    """The kubelet's 64-bit NUMA mask with its method names, for exact parity with upstream tests."""

    __slots__ = ("value",)

    def __init__(self, *bits: int) -> None:
        self.value = mask_of(bits)

    @classmethod
    def from_int(cls, value: int) -> BitMask:
        m = cls()
        m.value = value & FULL
        return m

    def add(self, *bits: int) -> None:
        self.value |= mask_of(bits)

    def remove(self, *bits: int) -> None:
        self.value &= ~mask_of(bits) & FULL

    def and_(self, *masks: BitMask) -> None:
        for m in masks:
            self.value &= m.value

    def or_(self, *masks: BitMask) -> None:
        for m in masks:
            self.value |= m.value

    def clear(self) -> None:
        self.value = 0

    def fill(self) -> None:
        self.value = FULL

    def is_empty(self) -> bool:
        return self.value == 0

    def is_set(self, bit: int) -> bool:
        return 0 <= bit < MASK_BITS and bool((self.value >> bit) & 1)

    def any_set(self, bits: Iterable[int]) -> bool:
        return any(self.is_set(b) for b in bits)

    def is_equal(self, other: BitMask) -> bool:
        return self.value == other.value

    def count(self) -> int:
        return self.value.bit_count()

    def get_bits(self) -> list[int]:
        return bits_of(self.value)

    def is_less_than(self, other: BitMask) -> bool:
        return self.value < other.value

    def is_greater_than(self, other: BitMask) -> bool:
        return self.value > other.value

    def is_narrower_than(self, other: BitMask) -> bool:
        return is_narrower(self.value, other.value)

    def __str__(self) -> str:
        return mask_string(self.value)

    def __repr__(self) -> str:
        return f"BitMask({bits_of(self.value)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BitMask) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


def and_masks(first: BitMask, *masks: BitMask) -> BitMask:
    """Package-level And: a copy of `first` AND-ed with every mask."""
    out = BitMask.from_int(first.value)
    out.and_(*masks)
    return out


def or_masks(first: BitMask, *masks: BitMask) -> BitMask:
    """Package-level Or: a copy of `first` OR-ed with every mask."""
    out = BitMask.from_int(first.value)
    out.or_(*masks)
    return out
