"""NUMA affinity masks as plain ints, with the kubelet's ordering rules (ENGINE.md §2.1).

Bit *i* set means NUMA node *i*. The engine works on ints; the kubelet's mutable `BitMask` type is
mirrored only in the tests (tests/conformance/bitmask_api.py), to run its vectors against its own API.
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
