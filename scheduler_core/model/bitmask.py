"""NUMA affinity masks as plain ints, with the kubelet's ordering rules (ENGINE.md §2.1).

Bit *i* set means NUMA node *i*. Hot paths use the module functions on ints; `BitMask` mirrors the
kubelet's mutable type (64 bits, all-or-nothing Add/Remove) for callers that want its exact API.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import combinations

from ..errors import EngineError

MASK_BITS = 64
FULL = (1 << MASK_BITS) - 1


class BitMaskError(EngineError):
    """A NUMA bit outside 0..63."""


def mask_of(bits: Iterable[int]) -> int:
    """Mask with the given NUMA ids set; raises `BitMaskError` for ids outside 0..63."""
    mask = 0
    for bit in bits:
        if not isinstance(bit, int) or bit < 0 or bit >= MASK_BITS:
            raise BitMaskError("bit number must be in range 0-63")
        mask |= 1 << bit
    return mask


_BYTE_BITS = [tuple(b for b in range(8) if byte >> b & 1) for byte in range(256)]
# _SHIFTED[i][byte]: the bits of `byte` as the i-th byte of a mask; grown on demand to the widest mask seen.
_SHIFTED: list[list[tuple[int, ...]]] = [_BYTE_BITS]


def bits_of(mask: int) -> list[int]:
    """Set bit numbers, ascending (by table, a byte at a time: explanations expand the same kinds
    of masks hundreds of thousands of times)."""
    if mask < 256:
        return list(_BYTE_BITS[mask])
    raw = mask.to_bytes((mask.bit_length() + 7) >> 3, "little")
    while len(_SHIFTED) < len(raw):
        base = len(_SHIFTED) * 8
        _SHIFTED.append([tuple(base + b for b in bits) for bits in _BYTE_BITS])
    out: list[int] = []
    for table, byte in zip(_SHIFTED, raw, strict=False):
        if byte:
            out += table[byte]
    return out


def count(mask: int) -> int:
    return mask.bit_count()


def is_narrower(a: int, b: int) -> bool:
    """kubelet IsNarrowerThan: fewer bits, or with equal counts the numerically smaller mask."""
    ca, cb = a.bit_count(), b.bit_count()
    if ca == cb:
        return a < b
    return ca < cb


def mask_string(mask: int) -> str:
    """kubelet BitMask.String(): binary digits zero-padded to width s+2 (largest even s with mask > 2^s)."""
    width = 2
    for s in range(62, 0, -2):
        if mask > (1 << s):
            width = s + 2
            break
    return format(mask, "b").zfill(width)


def iterate_masks(bits: Iterable[int]) -> Iterator[int]:
    """Every non-empty combination of `bits`, by size then lexicographic by position (IterateBitMasks)."""
    items = [1 << b for b in bits]
    for k in range(1, len(items) + 1):
        for combo in combinations(items, k):
            mask = 0
            for m in combo:
                mask |= m
            yield mask


def format_mask(mask: int | None) -> str:
    """Human form used in explanations: `{0,1}`; `any` for a nil mask."""
    if mask is None:
        return "any"
    return "{" + ",".join(str(b) for b in bits_of(mask)) + "}"


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
