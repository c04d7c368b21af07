"""The kubelet Topology Manager hint merge (ENGINE.md §2.2–§2.4): `TopologyHint`, the three-state
provider output, the policies none / best-effort / restricted / single-numa-node with their options,
and two merges that give the same answer:

* `merge_hints_reference` walks the cross product of the providers' hint lists exactly as upstream
  does (permutation by permutation, `compare` after each). It is the test oracle: short, obviously
  faithful, and exponential (the kubelet caps machines at 8 NUMA nodes because of it).
* `merge_hints` (the public entry point) finds the same hint without the cross product. `compare`
  is a total ranking (ENGINE.md §2.3, order-free formulation), so the result is simply the best merged
  hint that some permutation produces:

  1. Preferred merges are found directly: a permutation is preferred iff every hint in it is
     preferred and all its non-nil masks are equal, so the preferred merged masks are `D & A` for
     every raw mask A that each list offers as `(A, preferred)` or covers with `(nil, preferred)`,
     plus D itself when every list holds `(nil, preferred)`.
  2. Otherwise the set of reachable merged masks {D & x1 & ... & xm} is computed, either by a
     set product while that stays small, or by counting: with F_i(S) = #{x in list i : x ⊇ S}
     (a superset-sum "zeta" transform), the product of the F_i counts the tuples whose AND contains
     S, and the Möbius inversion of that product counts the tuples whose AND *is* S. Both transforms
     run on Python big ints holding one lane per mask (32 bits for a list's sums, 64 bits for the
     products), so they cost a few dozen big-int operations (up to 16 NUMA nodes; beyond that the
     set product is used). The best reachable mask under the non-preferred ranking is then read
     off by count class: count == B, then B-1 down to 1, then B+1 up, ties by the mask comparator.

Masks are ints (bit i = NUMA node i); `None` is the kubelet's nil mask ("any NUMA node").
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress, product, repeat
from operator import attrgetter, mul
from typing import Union

from ...errors import PolicyError, RequestError, TopologyError
from ...model.bitmask import FULL, MASK_BITS, BitMaskError, bits_of, is_narrower, mask_of, mask_string
from ...model.kubelet_config import TOPOLOGY_OPTIONS, TOPOLOGY_POLICIES, TopologyOptions

__all__ = [
    "MergeResult", "NUMAInfo", "ProviderHints", "TopologyHint", "as_hint", "average_distance",
    "can_admit", "compare", "compare_masks", "filter_single_numa_hints",
    "flatten_providers", "flatten_providers_labeled", "format_hint", "iterate_permutations",
    "max_of_min_affinity_counts", "merge_hints", "merge_hints_reference", "merge_permutation", "narrowest",
]


# --------------------------------------------------------------------------------------------------
# TopologyHint


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """A NUMA placement: `affinity` is a NUMA mask int (bit i = node i), None = nil ("any");
    `preferred` marks an ideally aligned placement."""

    affinity: int | None
    preferred: bool

    def __post_init__(self) -> None:
        a = self.affinity
        if a is not None and (type(a) is not int or a < 0 or a > FULL):
            raise BitMaskError(f"NUMA affinity must be a 64-bit mask int or None, not {a!r}")
        if type(self.preferred) is not bool:
            raise RequestError(f"a hint's preferred flag must be a bool, not {self.preferred!r}")

    def to_dict(self) -> dict:
        """`{"affinity": [sorted NUMA ids] | None, "preferred": bool}` (the vectors' form)."""
        return {"affinity": None if self.affinity is None else bits_of(self.affinity),
                "preferred": self.preferred}

    @classmethod
    def from_dict(cls, data: Mapping) -> TopologyHint:
        """Inverse of `to_dict`; the affinity may also be given as a mask int."""
        return as_hint(data)

    def __str__(self) -> str:
        return format_hint(self)


def format_hint(hint: TopologyHint, numa_count: int | None = None) -> str:
    """The seeds' notation: `{01: T}`, `{11: F}`, `{any: T}`. NUMA 0 is the rightmost digit; the
    width is the machine's NUMA node count when known, else the kubelet's `String()` width."""
    if hint.affinity is None:
        digits = "any"
    elif numa_count:
        digits = format(hint.affinity, "b").zfill(numa_count)
    else:
        digits = mask_string(hint.affinity)
    return "{" + digits + (": T}" if hint.preferred else ": F}")


def _affinity(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        if value < 0 or value > FULL:
            raise BitMaskError(f"NUMA mask {value!r} is outside 64 bits")
        return value
    if isinstance(value, (str, bytes, bool)) or not isinstance(value, Iterable):
        raise RequestError(f"a hint's affinity must be a list of NUMA ids, a mask int or None, not {value!r}")
    try:
        return mask_of(value)
    except BitMaskError:
        raise BitMaskError(f"NUMA ids {list(value)!r}: bit number must be in range 0-63") from None


def as_hint(value: object) -> TopologyHint:
    """A `TopologyHint` from a hint, a `{"affinity", "preferred"}` mapping or an `(affinity,
    preferred)` pair; the affinity may be a list of NUMA ids, a mask int or None."""
    if type(value) is TopologyHint:
        return value
    if isinstance(value, Mapping):
        if "preferred" not in value or "affinity" not in value:
            raise RequestError(f"a hint needs 'affinity' and 'preferred', got {dict(value)!r}")
        affinity, preferred = value["affinity"], value["preferred"]
    elif isinstance(value, tuple) and len(value) == 2:
        affinity, preferred = value
    else:
        raise RequestError(f"not a topology hint: {value!r}")
    if type(preferred) is not bool:
        raise RequestError(f"a hint's preferred flag must be a bool, not {preferred!r}")
    return TopologyHint(_affinity(affinity), preferred)


# --------------------------------------------------------------------------------------------------
# Provider output (ENGINE.md §2.2, §2.3)

#: One provider's answer: None (nil map), {} (empty map) or {resource: None | [] | [hints...]}.
ProviderHints = Union[Mapping[str, Union[Sequence[TopologyHint], None]], None]  # noqa: UP007

_ANY_PREFERRED = (TopologyHint(None, True),)
_IMPOSSIBLE = (TopologyHint(None, False),)


def _hint_list(hints: object, where: str) -> list[TopologyHint]:
    if isinstance(hints, (str, bytes, Mapping)) or not isinstance(hints, Iterable):
        raise RequestError(f"hints of {where} must be a list, None or [], not {hints!r}")
    out = hints if isinstance(hints, list) else list(hints)
    if all(map(isinstance, out, repeat(TopologyHint))):
        return out
    return [as_hint(x) for x in out]


def flatten_providers_labeled(providers: Sequence[ProviderHints]) -> list[tuple[str, list[TopologyHint]]]:
    """`filterProvidersHints` keeping a label per list (the resource name, or `provider <i>` for a
    provider that returned a nil or empty map), so explanations can show every provider's hints."""
    if isinstance(providers, (str, bytes, Mapping)) or not isinstance(providers, Iterable):
        raise RequestError(f"providers' hints must be a list of provider results, not {providers!r}")
    out: list[tuple[str, list[TopologyHint]]] = []
    for i, provider in enumerate(providers):
        if provider is None or (isinstance(provider, Mapping) and not provider):
            out.append((f"provider {i}", list(_ANY_PREFERRED)))
            continue
        if not isinstance(provider, Mapping):
            raise RequestError(f"provider {i} must return a mapping resource -> hints or None, not {provider!r}")
        for resource, hints in provider.items():
            if hints is None:
                out.append((str(resource), list(_ANY_PREFERRED)))
            elif isinstance(hints, Sequence) and not isinstance(hints, (str, bytes)) and len(hints) == 0:
                out.append((str(resource), list(_IMPOSSIBLE)))
            else:
                lst = _hint_list(hints, f"resource {resource!r}")
                out.append((str(resource), lst if lst else list(_IMPOSSIBLE)))
    return out


def flatten_providers(providers: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    """`filterProvidersHints`: one hint list per resource, nil map → [(nil, P)], nil list →
    [(nil, P)], empty list → [(nil, NP)] (the resource cannot be placed)."""
    return [lst for _, lst in flatten_providers_labeled(providers)]


def filter_single_numa_hints(lists: Sequence[Sequence[TopologyHint]]) -> list[list[TopologyHint]]:
    """single-numa-node keeps, per list, the preferred hints whose mask is nil or one NUMA node;
    a list may become empty (then no permutation exists and the pod is rejected)."""
    return [[h for h in lst if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
            for lst in lists]


def max_of_min_affinity_counts(lists: Sequence[Sequence[TopologyHint]]) -> int:
    """BestNonPreferredAffinityCount: the largest, over lists, of the bit count of the list's
    narrowest non-nil mask (lists with only nil masks are ignored; 0 when there are none)."""
    best = 0
    for lst in lists:
        counts = [h.affinity.bit_count() for h in lst if h.affinity is not None]
        if counts:
            best = max(best, min(counts))
    return best


# --------------------------------------------------------------------------------------------------
# NUMA info, mask comparators (ENGINE.md §2.2, §2.3)


def narrowest(m1: int, m2: int) -> int:
    """`NUMAInfo.Narrowest`: m1 if it is narrower than m2 (fewer bits, then smaller value), else m2."""
    return m1 if is_narrower(m1, m2) else m2


def _distance_row(distances: Mapping[int, Sequence[int] | None], node: int) -> Sequence[int]:
    row = distances.get(node)
    if row is None:
        raise TopologyError(f"no NUMA distances for node {node}")
    return row


def average_distance(distances: Mapping[int, Sequence[int] | None], mask: int) -> float:
    """`CalculateAverageFor`: mean of distances[x][y] over all ordered pairs of set bits, self pairs
    included, summed in float64 in ascending x then y order; 0 for an empty mask."""
    bits = bits_of(mask)
    if not bits:
        return 0.0
    total = 0.0
    terms = 0.0
    for x in bits:
        row = _distance_row(distances, x)
        for y in bits:
            if y >= len(row):
                raise TopologyError(f"distance row of NUMA node {x} has no entry for node {y}")
            total += float(row[y])
            terms += 1.0
    return total / terms


@dataclass(frozen=True)
class NUMAInfo:
    """The machine's NUMA nodes (in reported order) and, with prefer-closest, their distance rows."""

    nodes: tuple[int, ...]
    distances: Mapping[int, tuple[int, ...] | None]

    @classmethod
    def build(cls, nodes: Iterable[int], distances: Mapping | None = None,
              prefer_closest: bool = False) -> NUMAInfo:
        """`NewNUMAInfo`: distances are kept only with prefer-closest, and then every node needs a
        row (else the kubelet's `error getting NUMA distances from cadvisor`)."""
        ids: list[int] = []
        for nid in nodes:
            if type(nid) is not int or not 0 <= nid < MASK_BITS:
                raise TopologyError(f"NUMA node id {nid!r} must be an int in 0-63")
            if nid in ids:
                raise TopologyError(f"NUMA node {nid} is listed twice")
            ids.append(nid)
        rows: dict[int, tuple[int, ...] | None] = dict.fromkeys(ids)
        if prefer_closest:
            given = _int_keys(distances or {})
            for nid in ids:
                row = given.get(nid)
                if not row:
                    raise TopologyError("cannot discover NUMA topology: error getting NUMA distances from "
                                        f"cadvisor (no distances for NUMA node {nid})")
                values = _distance_values(nid, row)
                if len(values) <= max(ids):
                    raise TopologyError(f"distance row of NUMA node {nid} has {len(values)} values; it needs one "
                                        f"per NUMA id up to {max(ids)}")
                rows[nid] = values
        return cls(tuple(ids), rows)

    @property
    def default_mask(self) -> int:
        """DefaultAffinityMask: all machine NUMA nodes."""
        mask = 0
        for nid in self.nodes:
            mask |= 1 << nid
        return mask

    def narrowest(self, m1: int, m2: int) -> int:
        return narrowest(m1, m2)

    def average_for(self, mask: int) -> float:
        return average_distance(self.distances, mask)

    def closest(self, m1: int, m2: int) -> int:
        """`NUMAInfo.Closest`: fewer bits wins; equal counts → lower average distance, then the
        numerically smaller mask."""
        if m1.bit_count() != m2.bit_count():
            return narrowest(m1, m2)
        d1, d2 = self.average_for(m1), self.average_for(m2)
        if d1 == d2:
            return m1 if m1 < m2 else m2
        return m1 if d1 < d2 else m2

    def to_dict(self) -> dict:
        return {"nodes": list(self.nodes),
                "distances": {str(n): None if r is None else list(r) for n, r in self.distances.items()}}


def _int_keys(distances: Mapping) -> dict[int, object]:
    if not isinstance(distances, Mapping):
        raise TopologyError(f"NUMA distances must map a node id to its row, not {distances!r}")
    out = {}
    for key, row in distances.items():
        try:
            nid = int(key)
        except (TypeError, ValueError):
            raise TopologyError(f"NUMA distance key {key!r} is not a node id") from None
        out[nid] = row
    return out


def _distance_values(nid: int, row: object) -> tuple[int, ...]:
    if isinstance(row, (str, bytes)) or not isinstance(row, Iterable):
        raise TopologyError(f"distance row of NUMA node {nid} must be a list of ints, not {row!r}")
    values = tuple(row)
    for v in values:
        if type(v) is not int or not 0 <= v < 1 << 32:
            raise TopologyError(f"distance {v!r} from NUMA node {nid} must be an int in 0..2^32-1")
    return values


MaskWinner = Callable[[int, int], int]


def compare_masks(current: TopologyHint, candidate: TopologyHint, winner: MaskWinner = narrowest) -> TopologyHint:
    """`compareNUMAAffinityMasks`: equal masks keep current; else `winner(current, candidate)`."""
    if candidate.affinity == current.affinity:
        return current
    best = winner(current.affinity, candidate.affinity)
    return current if best == current.affinity else candidate


def compare(current: TopologyHint | None, candidate: TopologyHint, best_non_preferred: int,
            winner: MaskWinner = narrowest) -> TopologyHint | None:
    """`HintMerger.compare` (ENGINE.md §2.3): returns `current` or `candidate` itself."""
    k = candidate.affinity.bit_count()
    if k == 0:
        return current
    if current is None:
        return candidate
    if current.preferred != candidate.preferred:
        return candidate if candidate.preferred else current
    if current.preferred:
        return compare_masks(current, candidate, winner)
    c, b = current.affinity.bit_count(), best_non_preferred
    if c > b:
        return compare_masks(current, candidate, winner)
    if c == b:
        return compare_masks(current, candidate, winner) if k == b else current
    if k > b:
        return current
    if k == b:
        return candidate
    if k != c:
        return candidate if k > c else current
    return compare_masks(current, candidate, winner)


def merge_permutation(default: int, permutation: Sequence[TopologyHint]) -> TopologyHint:
    """`mergePermutation`: AND of the non-nil masks with the default; preferred only if every hint
    is preferred and all non-nil masks are equal."""
    preferred = True
    merged = default
    first = None
    for hint in permutation:
        if hint.affinity is not None:
            if first is None:
                first = hint.affinity
            elif hint.affinity != first:
                preferred = False
            merged &= hint.affinity
        if not hint.preferred:
            preferred = False
    return TopologyHint(merged, preferred)


def iterate_permutations(lists: Sequence[Sequence[TopologyHint]]) -> Iterable[tuple[TopologyHint, ...]]:
    """`iterateAllProviderTopologyHints`: the cross product, first list outermost; no lists → one
    empty permutation, an empty list → none."""
    return product(*lists)


def can_admit(policy: str, hint: TopologyHint) -> bool:
    """`CanAdmitPodResult`: none and best-effort always admit; restricted and single-numa-node
    admit only a preferred hint."""
    _check_policy(policy)
    return policy in ("none", "best-effort") or hint.preferred


# --------------------------------------------------------------------------------------------------
# The merge


@dataclass(frozen=True, slots=True)
class MergeResult:
    """The merged hint and the admit verdict, with what explains them: the flattened hint lists
    (label, hints) as the merge saw them (after single-numa-node filtering), the machine's NUMA nodes
    and BestNonPreferredAffinityCount. Policy none leaves the explanation empty."""

    hint: TopologyHint
    admit: bool
    policy: str = ""
    resource_hints: tuple[tuple[str, tuple[TopologyHint, ...]], ...] = ()
    numa_nodes: tuple[int, ...] = ()
    best_non_preferred: int = 0

    def to_dict(self) -> dict:
        n = len(self.numa_nodes) or None
        return {
            "policy": self.policy,
            "hint": self.hint.to_dict(),
            "hint_text": format_hint(self.hint, n),
            "admit": self.admit,
            "numa_nodes": list(self.numa_nodes),
            "best_non_preferred_affinity_count": self.best_non_preferred,
            "resource_hints": [{"resource": label, "hints": [h.to_dict() for h in hints],
                                "text": " ".join(format_hint(h, n) for h in hints)}
                               for label, hints in self.resource_hints],
        }


def _check_policy(policy: object) -> None:
    if policy not in TOPOLOGY_POLICIES:
        raise PolicyError(f"unknown Topology Manager policy {policy!r}; expected one of: "
                          f"{', '.join(TOPOLOGY_POLICIES)}")


def _parse_options(options: object) -> TopologyOptions:
    if options is None or isinstance(options, TopologyOptions):
        return options or TopologyOptions()
    if not isinstance(options, Mapping):
        raise PolicyError(f"Topology Manager policy options must be a mapping name -> value, not {options!r}")
    # The vectors spell option names with underscores; accept those as aliases of the kubelet names.
    named = {}
    for name, value in options.items():
        alias = name.replace("_", "-") if isinstance(name, str) else name
        named[alias if alias in TOPOLOGY_OPTIONS and name not in TOPOLOGY_OPTIONS else name] = value
    return TopologyOptions.parse(named)


#: (lists, NUMA info, use Closest) -> (best hint, BestNonPreferredAffinityCount)
BestFinder = Callable[[list[list[TopologyHint]], NUMAInfo, bool], tuple[TopologyHint, int]]


def _merge(policy: str, providers_hints: Sequence[ProviderHints], numa_nodes: Sequence[int], options: object,
           distances: Mapping | None, find_best: BestFinder) -> MergeResult:
    _check_policy(policy)
    if policy == "none":
        # The kubelet builds the none scope before parsing options or discovering NUMA nodes.
        return MergeResult(TopologyHint(None, False), True, policy)
    opts = _parse_options(options)
    info = NUMAInfo.build(numa_nodes, distances, opts.prefer_closest_numa_nodes)
    if len(info.nodes) > opts.max_allowable_numa_nodes:
        raise TopologyError(f"topology manager policy {policy!r} is unsupported on machines with more than "
                            f"{opts.max_allowable_numa_nodes} NUMA Nodes (this machine has {len(info.nodes)}; "
                            "raise the max-allowable-numa-nodes option)")
    labeled = flatten_providers_labeled(providers_hints)
    lists = [lst for _, lst in labeled]
    if policy == "single-numa-node":
        lists = filter_single_numa_hints(lists)
        labeled = [(label, lst) for (label, _), lst in zip(labeled, lists, strict=True)]
    closest = opts.prefer_closest_numa_nodes and policy != "single-numa-node"
    best, b = find_best(lists, info, closest)
    if policy == "single-numa-node" and best.affinity == info.default_mask:
        best = TopologyHint(None, best.preferred)
    return MergeResult(best, policy == "best-effort" or best.preferred, policy,
                       tuple((label, tuple(lst)) for label, lst in labeled), info.nodes, b)


def _best_reference(lists: list[list[TopologyHint]], info: NUMAInfo, closest: bool) -> tuple[TopologyHint, int]:
    """HintMerger.Merge, literally: every permutation, in upstream order, through `compare`."""
    default = info.default_mask
    winner = info.closest if closest else narrowest
    b = max_of_min_affinity_counts(lists)
    best = None
    for permutation in iterate_permutations(lists):
        best = compare(best, merge_permutation(default, permutation), b, winner)
    return (best if best is not None else TopologyHint(default, False)), b


def merge_hints_reference(policy: str, providers_hints: Sequence[ProviderHints], numa_nodes: Sequence[int],
                          options: Mapping[str, object] | TopologyOptions | None = None,
                          distances: Mapping[int, Sequence[int]] | None = None) -> MergeResult:
    """The Topology Manager merge by the plain cross product (test oracle; exponential)."""
    return _merge(policy, providers_hints, numa_nodes, options, distances, _best_reference)


def merge_hints(policy: str, providers_hints: Sequence[ProviderHints], numa_nodes: Sequence[int],
                options: Mapping[str, object] | TopologyOptions | None = None,
                distances: Mapping[int, Sequence[int]] | None = None) -> MergeResult:
    """`Policy.Merge` of the kubelet Topology Manager (ENGINE.md §2.3), without the cross product.

    `policy`: none | best-effort | restricted | single-numa-node. `providers_hints`: one entry per
    hint provider in registration order (device, CPU, memory), each None, {} or {resource: None |
    [] | [TopologyHint...]} (hints may also be `{"affinity": [ids] | None, "preferred": bool}`).
    `numa_nodes`: the machine's NUMA ids. `options`: kubelet option strings
    (`prefer-closest-numa-nodes`, `max-allowable-numa-nodes`) or a `TopologyOptions`.
    `distances[a]`: the distance row of node a, indexed by NUMA id (needed for prefer-closest).
    Bad input raises `PolicyError` / `TopologyError` / `RequestError` naming the value; a machine with
    more NUMA nodes than `max-allowable-numa-nodes` (default 8) raises the kubelet's error.
    """
    return _merge(policy, providers_hints, numa_nodes, options, distances, _best_fast)


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


def _lanes_to_array(f: int, size: int, code: str) -> array:
    out = array(code)
    out.frombytes(f.to_bytes(out.itemsize * size, "little"))
    if sys.byteorder != "little":
        out.byteswap()
    return out


def _array_to_lanes(values: array) -> int:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return int.from_bytes(values.tobytes(), "little")


@lru_cache(maxsize=2)
def _every_mask(size: int) -> frozenset[int]:
    return frozenset(range(size))


def _indicator32(masks: set[int] | bytes, size: int) -> int:
    """32-bit lanes holding 1 for the given masks (a set of masks, or one flag byte per mask)."""
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
        group: list[Iterable[int] | bytes] = [] if flags is None else [flags]
        bound = 1 if flags is None else size
        while i < len(sets) and (not group or bound * len(sets[i]) < _LANE_LIMIT):
            bound *= len(sets[i])
            group.append(sets[i])
            i += 1
        total: array | None = None
        for member in group:
            counts = _lanes_to_array(_superset_sums(_indicator32(member, size), n, 32), size, _U32)
            total = array("Q", counts) if total is None else array("Q", map(mul, total, counts))
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
            row = _distance_row(info.distances, x)
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


def _best_fast(lists: list[list[TopologyHint]], info: NUMAInfo, closest: bool) -> tuple[TopologyHint, int]:
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


