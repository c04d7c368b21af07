"""Volcano's topology hints and its legacy merge (`numaaware/policy/`, ENGINE.md §3.3, §3.4): which
tasks have a policy, the providers' hints filtered and merged, and the policy's verdict."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import product
from typing import NamedTuple, TypedDict

from ..model.bitmask import bits_of as _bits


class HintDict(TypedDict):
    affinity: list[int] | None
    preferred: bool


class Hint(NamedTuple):
    """A topology hint as Volcano handles it: `affinity` NUMA mask int, None = nil mask ("any")."""

    affinity: int | None
    preferred: bool

    def to_dict(self) -> HintDict:
        return {"affinity": None if self.affinity is None else _bits(self.affinity), "preferred": self.preferred}


def has_policy(policy: str | None) -> bool:
    """A task "has a policy" unless it is absent, empty or `none` (ENGINE.md §3.3)."""
    return bool(policy) and policy != "none"



# ------------------------------------------------------------------------------------------------
# Policies: Volcano's legacy merge (ENGINE.md §3.4)
# ------------------------------------------------------------------------------------------------


def filter_providers_hints(providers_hints: Sequence[Mapping[str, Sequence[Hint] | None] | None]) -> list[list[Hint]]:
    """No map → [(nil, preferred)]; nil list → [(nil, preferred)]; empty list → [(nil, not preferred)]."""
    lists: list[list[Hint]] = []
    for hints in providers_hints:
        if not hints:
            lists.append([Hint(None, True)])
            continue
        for resource in hints:
            value = hints[resource]
            if value is None:
                lists.append([Hint(None, True)])
            elif len(value) == 0:
                lists.append([Hint(None, False)])
            else:
                lists.append([h if isinstance(h, Hint) else Hint(h.affinity, h.preferred) for h in value])
    return lists


def merge_filtered_hints(numa_nodes: Iterable[int], lists: Sequence[Sequence[Hint]]) -> Hint:
    """ENGINE.md §3.4: best over every permutation; preferred first, then narrower (fewer bits, smaller mask)."""
    default = 0
    for n in numa_nodes:
        default |= 1 << n
    best_mask, best_pref = default, False
    for combo in product(*lists):
        mask = default
        preferred = True
        for h in combo:
            if h.affinity is not None:
                mask &= h.affinity
            if not h.preferred:
                preferred = False
        if not mask:
            continue
        if preferred and not best_pref:
            best_mask, best_pref = mask, True
        elif preferred == best_pref:
            c, bc = mask.bit_count(), best_mask.bit_count()
            if c < bc or (c == bc and mask < best_mask):
                best_mask = mask
    return Hint(best_mask, best_pref)


def policy_predicate(policy: str, numa_nodes: Iterable[int],
                     providers_hints: Sequence[Mapping[str, Sequence[Hint] | None] | None]) -> tuple[Hint, bool]:
    """A Volcano topology policy's Predicate (ENGINE.md §3.4): (best hint, admit). Unknown names act as `none`."""
    if policy not in ("best-effort", "restricted", "single-numa-node"):
        return Hint(None, False), True
    lists = filter_providers_hints(providers_hints)
    if policy == "single-numa-node":
        lists = [[h for h in lst if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
                 for lst in lists]
    best = merge_filtered_hints(numa_nodes, lists)
    if policy == "best-effort":
        return best, True
    return best, best.preferred


def guaranteed_cpus(cpu_request_milli: int | None) -> int:
    """Volcano's integer-CPU rule (ENGINE.md §3.2): whole CPUs of the request, 0 when fractional or absent."""
    if not cpu_request_milli or cpu_request_milli % 1000:
        return 0
    return cpu_request_milli // 1000
