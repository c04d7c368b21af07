"""The pieces of the kubelet's `policy.go` that every policy shares (ENGINE.md §2.3, §2.4): the
hint comparison, the merge of one permutation, the single-numa-node filter, `CanAdmitPodResult`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import product
from typing import Protocol

from ...errors import RequestError
from .hint import TopologyHint
from .numa_info import MaskWinner, narrowest


def merged_mask(hint: TopologyHint) -> int:
    """The mask of a merged hint: a merge ANDs the default mask in, so it is never nil. A nil one here
    is a caller's error, named as such (not an AttributeError deep in the comparison)."""
    if hint.affinity is None:
        raise RequestError(f"{hint} is not a merged hint: a merged hint's NUMA mask is never nil (any)")
    return hint.affinity


def compare_masks(current: TopologyHint, candidate: TopologyHint, winner: MaskWinner = narrowest) -> TopologyHint:
    """`compareNUMAAffinityMasks`: equal masks keep current; else `winner(current, candidate)`."""
    a, b = merged_mask(current), merged_mask(candidate)
    if a == b:
        return current
    return current if winner(a, b) == a else candidate


def compare(current: TopologyHint | None, candidate: TopologyHint, best_non_preferred: int,
            winner: MaskWinner = narrowest) -> TopologyHint | None:
    """`HintMerger.compare` (ENGINE.md §2.3): returns `current` or `candidate` itself."""
    k = merged_mask(candidate).bit_count()
    if k == 0:
        return current
    if current is None:
        return candidate
    if current.preferred != candidate.preferred:
        return candidate if candidate.preferred else current
    if current.preferred:
        return compare_masks(current, candidate, winner)
    c, b = merged_mask(current).bit_count(), best_non_preferred
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


class Policy(Protocol):
    """The kubelet's `Policy` interface, in the parts that differ between policies (`policy_<name>`
    modules): whether it merges at all, which hints take part, the closest-NUMA tie-break, how the
    best hint is finished and whether the pod is admitted with it."""

    name: str
    merges: bool
    uses_closest: bool

    def filter(self, lists: list[list[TopologyHint]]) -> list[list[TopologyHint]]: ...

    def finish(self, hint: TopologyHint, default_mask: int) -> TopologyHint: ...

    def can_admit(self, hint: TopologyHint) -> bool: ...
