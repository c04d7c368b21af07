"""Koordinator's scheduler-side topology manager (frameworkext/topologymanager): how the hints of
NodeNUMAResource are merged under a node's NUMA topology policy into one NUMA affinity.

It is the kubelet's merge with three additions, so it lives here rather than reusing the
kubelet's: a hint carries a score (among equally narrow merged hints the higher score wins), an
`unsatisfied` flag (best-effort then gives up any affinity), and the pod's NUMA exclusivity
(a merged hint that would put a single-NUMA pod on a NUMA node shared by multi-NUMA pods, or the
reverse, is not preferred). Masks are ints; a hint without affinity has `mask` None."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product

from ..model.bitmask import is_narrower, mask_of, mask_string

BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE = "BestEffort", "Restricted", "SingleNUMANode"
POLICIES = frozenset({BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE})
#: pod NUMA exclusivity (numa-topology-spec singleNUMANodeExclusive); "Preferred" only lets any affinity through
EXCLUSIVE_REQUIRED = "Required"
#: NUMA node sharing states (NodeAllocation.NUMANodeSharedStatus)
IDLE, SHARED, SINGLE = "idle", "shared", "single"

#: upstream's reasons (ErrUnsatisfiedNUMAResource, ErrNUMAHintCannotAligned)
UNSATISFIED = "Unsatisfied NUMA {}"
CANNOT_ALIGN = "Unaligned NUMA Hint cause {}"


@dataclass(frozen=True)
class Hint:
    mask: int | None
    preferred: bool = False
    unsatisfied: bool = False
    score: int = 0


#: one provider's hints: per resource, its hints (None: no preference for that resource)
ProviderHints = Mapping[str, Sequence[Hint] | None]


def exclusive_ok(hint: Hint, exclusive: str, status: Sequence[str]) -> bool:
    """checkExclusivePolicy: may a pod with this exclusivity take this affinity?"""
    if hint.mask is None:
        return False
    if exclusive == EXCLUSIVE_REQUIRED:
        bits = [b for b in range(hint.mask.bit_length()) if hint.mask >> b & 1]
        if len(bits) > 1:
            return all(status[b] != SINGLE for b in bits)
        return status[bits[0]] != SHARED
    return True


def _merge_permutation(default: int, permutation: Sequence[Hint]) -> Hint:
    preferred, satisfied = True, True
    merged, first, widest, seen = default, None, 0, False
    for hint in permutation:
        if hint.mask is not None:
            if not seen:
                first, seen = hint.mask, True
            elif hint.mask != first:
                preferred = False
            widest = max(widest, hint.mask.bit_count())
            merged &= hint.mask
        if not hint.preferred:
            preferred = False
        if hint.unsatisfied:
            satisfied = False
    satisfied = (not seen or widest == merged.bit_count()) and satisfied
    return Hint(merged, preferred, not satisfied)


def filter_providers(providers: Sequence[ProviderHints]) -> tuple[list[list[Hint]], list[str], list[str]]:
    """filterProvidersHints: the hint lists to permute, the reasons (a resource with no possible
    affinity) and the per-resource summaries upstream quotes when it cannot align. Resources are
    taken in name order (upstream ranges over a Go map; the merge does not depend on the order)."""
    out: list[list[Hint]] = []
    reasons: list[str] = []
    summary: list[str] = []
    for hints in providers:
        if not hints:
            out.append([Hint(None, preferred=True)])
            continue
        for resource in sorted(hints):
            listed = hints[resource]
            if listed is None:
                out.append([Hint(None, preferred=True)])
            elif not listed:
                out.append([Hint(None, preferred=False, unsatisfied=True)])
                reasons.append(UNSATISFIED.format(resource))
            else:
                summary.append(_summary(resource, listed))
                out.append(list(listed))
    return out, reasons, sorted(summary)


def _fmt(mask: int | None) -> str:
    return "<nil>" if mask is None else mask_string(mask)


def _summary(resource: str, hints: Sequence[Hint]) -> str:
    usable = [h for h in hints if not h.unsatisfied]
    preferred = " ".join(_fmt(h.mask) for h in usable if h.preferred)
    possible = " ".join(_fmt(h.mask) for h in usable)
    return f"{resource} prefer [{preferred}] among [{possible}]"


def merge_filtered(numa_nodes: Sequence[int], filtered: Sequence[Sequence[Hint]], exclusive: str,
                   status: Sequence[str]) -> Hint:
    """mergeFilteredHints: the best merged permutation (preferred, then narrower, then higher score)."""
    default = mask_of(numa_nodes)
    best = Hint(default)
    for permutation in product(*filtered):
        merged = _merge_permutation(default, permutation)
        mask = merged.mask or 0
        if mask == 0:
            continue
        preferred = merged.preferred and exclusive_ok(merged, exclusive, status)
        score = sum(h.score for h in permutation if h.mask is not None and h.mask == mask)
        if preferred and not best.preferred:
            best = Hint(mask, preferred, merged.unsatisfied, score)
            continue
        if not preferred and best.preferred:
            continue
        best_mask = best.mask or 0
        if not is_narrower(mask, best_mask):
            if mask.bit_count() == best_mask.bit_count() and score > best.score:
                best = Hint(mask, preferred, merged.unsatisfied, score)
            continue
        best = Hint(mask, preferred, merged.unsatisfied, score)
    return best


def merge(policy: str, numa_nodes: Sequence[int], providers: Sequence[ProviderHints], exclusive: str,
          status: Sequence[str]) -> tuple[Hint, bool, list[str]]:
    """Policy.Merge: the best hint, whether the policy admits it, and the reasons when it does not."""
    filtered, reasons, summary = filter_providers(providers)
    default = mask_of(numa_nodes)
    if policy == BEST_EFFORT:
        best = merge_filtered(numa_nodes, filtered, exclusive, status)
        if best.unsatisfied:
            best = Hint(default)
        return best, True, []
    if policy == RESTRICTED:
        if reasons:
            return Hint(default), False, reasons
        best = merge_filtered(numa_nodes, filtered, exclusive, status)
        if not best.preferred:
            return best, False, [CANNOT_ALIGN.format(" & ".join(summary))]
        return best, True, []
    if policy == SINGLE_NUMA_NODE:
        if reasons:
            return Hint(None), False, reasons
        single = [[h for h in hints if h.preferred and (h.mask is None or h.mask.bit_count() == 1)]
                  for hints in filtered]
        best = merge_filtered(numa_nodes, single, exclusive, status)
        if best.mask == default:
            best = Hint(None, best.preferred)
        if not best.preferred:
            return best, False, [CANNOT_ALIGN.format(",".join(summary))]
        return best, True, []
    raise ValueError(f"not a NUMA topology policy: {policy!r}")
