"""The merge's fast search (ENGINE.md §2.3): the hint `merge_hints` returns, found without walking the
cross product of the providers' lists (see the `policy` module's docstring for the method)."""

from __future__ import annotations

import sys
from array import array
from functools import lru_cache
from itertools import compress
from operator import attrgetter, mul

from ...model.bitmask import bits_of
from .hint import TopologyHint
from .numa_info import NUMAInfo, distance_row
from .policy import max_of_min_affinity_counts

# --------------------------------------------------------------------------------------------------
# The fast search

_AFFINITY = attrgetter("affinity")
_PREFERRED = attrgetter("preferred")
_LANE_LIMIT = 1 << 62       # products of counts must stay below this (no carry between 64-bit lanes)
ZETA_MAX_NODES = 16         # beyond this the 2^n lanes get too big; the set product is used instead
#: Pairs a set-product step may cost before the counting transforms take over (None: by NUMA count).
#: Tests set it to 0 or to a huge value to drive each path on its own.
SET_PRODUCT_BUDGET: int | None = None
_U32 = next(code for code in "IL" if array(code).itemsize == 4)


@lru_cache(maxsize=4)
def _lane_masks(n: int, width: int) -> tuple[list[int], int, int]:
    """For 2^n lanes of `width` bits: per bit b the all-ones lanes whose index lacks b; the lanes
    of 1; and the lanes of 2^(width-1)-1 (adding it sets a lane's top bit iff the lane is non-zero)."""
    size, step = 1 << n, width // 8
    lane = b"\xff" * step
    selectors = []
    for b in range(n):
        block = 1 << b
        selectors.append(int.from_bytes((lane * block + bytes(step * block)) * (size // (2 * block)), "little"))
    ones = int.from_bytes((b"\x01" + bytes(step - 1)) * size, "little")
    half = int.from_bytes((b"\xff" * (step - 1) + b"\x7f") * size, "little")
    return selectors, ones, half


@lru_cache(maxsize=4)
def _masks_by_count(n: int) -> list[list[int]]:
    """All masks of n bits grouped by bit count, each group ascending."""
    groups: list[list[int]] = [[] for _ in range(n + 1)]
    for z in range(1 << n):
        groups[z.bit_count()].append(z)
    return groups


def _superset_sums(f: int, n: int, width: int) -> int:
    """Lane S becomes the sum of lanes T ⊇ S (zeta transform over supersets)."""
    selectors = _lane_masks(n, width)[0]
    for b in range(n):
        f += (f >> (width << b)) & selectors[b]
    return f


def _exact_from_superset(f: int, n: int, width: int) -> int:
    """Inverse of `_superset_sums` (Möbius). Every intermediate lane is a count (tuples whose AND
    matches on the bits done so far), never negative, so subtracting never borrows across lanes."""
    selectors = _lane_masks(n, width)[0]
    for b in range(n):
        f -= (f >> (width << b)) & selectors[b]
    return f


def _lanes_to_array(f: int, size: int, code: str) -> array[int]:
    out = array(code)
    out.frombytes(f.to_bytes(out.itemsize * size, "little"))
    if sys.byteorder != "little":
        out.byteswap()
    return out


def _array_to_lanes(values: array[int]) -> int:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return int.from_bytes(values.tobytes(), "little")


@lru_cache(maxsize=2)
def _every_mask(size: int) -> frozenset[int]:
    return frozenset(range(size))


def _indicator32(masks: set[int] | bytes, size: int) -> int:
    """32-bit lanes holding 1 for the given masks (a set of masks, or one flag byte per mask)."""
    byte_flags: bytes | bytearray
    if isinstance(masks, bytes):
        byte_flags = masks
    elif len(masks) > size // 2:  # mostly full (capacity-generated lists): clear the few missing
        byte_flags = bytearray(b"\x01") * size
        for z in _every_mask(size).difference(masks):
            byte_flags[z] = 0
    else:
        byte_flags = bytearray(size)
        for z in masks:
            byte_flags[z] = 1
    flags = bytearray(4 * size)
    flags[::4] = byte_flags
    return int.from_bytes(flags, "little")


def _superset_counts(member: set[int] | bytes, n: int, size: int) -> array[int]:
    """Per mask S, how many of the member's masks contain S (32-bit lanes)."""
    return _lanes_to_array(_superset_sums(_indicator32(member, size), n, 32), size, _U32)


def _reachable_flags(sets: list[set[int]], n: int) -> bytes:
    """flags[z] = 1 iff z = x1 & ... & xk for some choice x_i in sets[i] (masks of n <= 16 bits).

    Per list, the superset sums of its indicator (32-bit lanes: at most 2^n each) count its masks
    containing S; their lane-wise product (64-bit) counts the tuples whose AND contains S, and the
    Möbius inversion of that counts the tuples whose AND is exactly S. Lists are grouped so the
    product stays below 2^62; a group's result becomes a 0/1 list for the next group."""
    size = 1 << n
    _, ones, half = _lane_masks(n, 64)
    flags: bytes | None = None  # one byte per mask: reachable so far
    i = 0
    while i < len(sets):
        group: list[set[int] | bytes] = [] if flags is None else [flags]
        bound = 1 if flags is None else size
        while i < len(sets) and (not group or bound * len(sets[i]) < _LANE_LIMIT):
            bound *= len(sets[i])
            group.append(sets[i])
            i += 1
        total = array("Q", _superset_counts(group[0], n, size))
        for member in group[1:]:
            total = array("Q", map(mul, total, _superset_counts(member, n, size)))
        exact = _exact_from_superset(_array_to_lanes(total), n, 64)
        flags = (((exact + half) >> 63) & ones).to_bytes(8 * size, "little")[::8]
    return flags if flags is not None else bytes(size)


class _Packing:
    """Maps masks within the default mask D to dense n-bit masks (D's bits in order) and back;
    it keeps numeric order, so "numerically smaller" is the same on both sides."""

    def __init__(self, default: int) -> None:
        self.bits = bits_of(default)
        self.identity = default == (1 << len(self.bits)) - 1

    def pack(self, mask: int) -> int:
        if self.identity:
            return mask
        out = 0
        for j, b in enumerate(self.bits):
            if mask >> b & 1:
                out |= 1 << j
        return out

    def unpack(self, mask: int) -> int:
        if self.identity:
            return mask
        out = 0
        for j, b in enumerate(self.bits):
            if mask >> j & 1:
                out |= 1 << b
        return out


class _PairSums:
    """Sum of distances[x][y] over ordered pairs of a mask's nodes, from per-node tables over 8-bit
    chunks of the mask (the integer sum is exact, so sum / count² is the spec's float64 average)."""

    def __init__(self, info: NUMAInfo) -> None:
        self.tables: dict[int, list[list[int]]] = {}
        top = max(info.nodes, default=0)
        chunks = top // 8 + 1
        for x in info.nodes:
            row = distance_row(info.distances, x)
            per_chunk = []
            for c in range(chunks):
                table = [0] * 256
                for byte in range(1, 256):
                    low = byte & -byte
                    y = 8 * c + low.bit_length() - 1
                    # NUMAInfo.build checked that rows cover every node id; other ids never occur.
                    table[byte] = table[byte ^ low] + (row[y] if y < len(row) else 0)
                per_chunk.append(table)
            self.tables[x] = per_chunk

    def average(self, mask: int) -> float:
        total = 0
        for x in bits_of(mask):
            tables = self.tables[x]
            m, c = mask, 0
            while m:
                total += tables[c][m & 255]
                m >>= 8
                c += 1
        k = mask.bit_count()
        return total / (k * k)


def _best_of_class(masks: list[int], info: NUMAInfo, closest: bool) -> int:
    """The winner among equal-count masks: smallest value (Narrowest), or lowest average distance
    then smallest value (Closest)."""
    if not closest or len(masks) == 1:
        return min(masks)
    if len(masks) <= 16:
        return min(masks, key=lambda m: (info.average_for(m), m))
    sums = _PairSums(info)
    return min(masks, key=lambda m: (sums.average(m), m))


def _fewest_bits(masks: set[int], n: int) -> int:
    """Smallest bit count in a set of n-bit masks, scanning count classes from 0 (C-level lookups)."""
    for k, group in enumerate(_masks_by_count(n)):
        if not masks.isdisjoint(group):
            return k
    raise AssertionError("unreachable: masks is not empty")  # pragma: no cover


def _class_order(b: int, n: int) -> list[int]:
    """Non-preferred bit counts, best first: b, then b-1 .. 1, then b+1 .. n."""
    order = [b] if 1 <= b <= n else []
    order += range(min(b - 1, n), 0, -1)
    order += range(max(b + 1, 1), n + 1)
    return order


def best_merged_hint(lists: list[list[TopologyHint]], info: NUMAInfo, closest: bool) -> tuple[TopologyHint, int]:
    """The best merged hint under the ENGINE.md §2.3 ranking, without enumerating permutations."""
    default = info.default_mask
    if any(not lst for lst in lists):
        return TopologyHint(default, False), max_of_min_affinity_counts(lists)  # no permutation at all
    b = 0
    common: set[int] | None = None     # raw masks every list offers as preferred (or covers by nil, P)
    offered: set[int] = set()          # raw preferred masks of lists holding (nil, P)
    all_nil_preferred = True
    choices: list[set[int]] = []       # per list: distinct masks AND-ed with D (nil → D)
    contiguous = default == (1 << default.bit_length()) - 1
    n = len(info.nodes)
    for lst in lists:
        if common is None or common:
            affinities = list(map(_AFFINITY, lst))
            masks = set(affinities)
            preferred = set(compress(affinities, map(_PREFERRED, lst)))
            if None in preferred:
                preferred.discard(None)
                offered |= preferred
            else:
                all_nil_preferred = False
                common = preferred if common is None else common & preferred
        else:
            masks = set(map(_AFFINITY, lst))  # no preferred merge is possible any more
        has_nil = None in masks
        masks.discard(None)
        inside = contiguous and (not masks or max(masks) <= default)
        if masks:
            big = inside and n <= ZETA_MAX_NODES and len(masks) > 256
            b = max(b, _fewest_bits(masks, n) if big else min(map(int.bit_count, masks)))
        if inside:
            restricted = masks  # already inside D
        else:
            restricted = {m & default for m in masks}
        if has_nil:
            restricted.add(default)
        choices.append(restricted)

    # 1. Preferred merges.
    if common is None:
        candidates = offered
    else:
        candidates = common
    merged = {a & default for a in candidates}
    if all_nil_preferred:
        merged.add(default)
    merged.discard(0)
    if merged:
        fewest = min(map(int.bit_count, merged))
        return TopologyHint(_best_of_class([m for m in merged if m.bit_count() == fewest], info, closest), True), b

    # 2. Non-preferred: the set of reachable merged masks, then the best by count class.
    choices.sort(key=len)
    reached = choices[0] if choices else {default}  # = {D & x for x in the first list}
    budget = max(2048, (n << n) // 2) if SET_PRODUCT_BUDGET is None else SET_PRODUCT_BUDGET
    i = 1 if choices else 0
    while i < len(choices) and (len(reached) * len(choices[i]) <= budget or n > ZETA_MAX_NODES):
        options = choices[i]
        reached = {r & t for r in reached for t in options}
        i += 1
    if i < len(choices):
        packing = _Packing(default)
        sets = [reached, *choices[i:]]
        if not packing.identity:
            sets = [{packing.pack(m) for m in s} for s in sets]
        flags = _reachable_flags(sets, n)
        by_count = _masks_by_count(n)
        flag = flags.__getitem__
        for k in _class_order(b, n):
            hits = list(filter(flag, by_count[k]))
            if hits:
                best = _best_of_class([packing.unpack(z) for z in hits], info, closest)
                return TopologyHint(best, False), b
        return TopologyHint(default, False), b
    reached = reached - {0}
    if not reached:
        return TopologyHint(default, False), b
    by_count_set: dict[int, list[int]] = {}
    for m in reached:
        by_count_set.setdefault(m.bit_count(), []).append(m)
    for k in _class_order(b, max(by_count_set)):
        if k in by_count_set:
            return TopologyHint(_best_of_class(by_count_set[k], info, closest), False), b
    raise AssertionError("unreachable: a non-empty class exists")  # pragma: no cover
