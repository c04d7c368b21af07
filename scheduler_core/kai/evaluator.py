"""KAI's per-policy evaluators: whether the kubelet would align a pod's units on a node's zones,
and on which zones KAI then charges them.

- single-numa-node: each unit fits entirely in one zone, the lowest that holds it;
- restricted: the kubelet's merge as KAI models it: every requested resource's preferred width (the
  fewest zones whose Allocatable covers it) must agree; a width-1 unit takes the lowest zone that
  fits it, a wider one the lexicographically lowest mask of that width whose summed Available
  covers every resource;
- best-effort (never rejects; feeds the ledger and the score): grow a mask greedily, each round
  adding the zone that covers the most unmet demand.

Concurrent units are drawn one after the other (lowest zone of the mask first), each seeing what
the earlier ones took; serial units are each checked alone against the pristine availability.
A placement is `{zone index: [amount per resource]}`; `None` means not alignable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from .zones import Amounts, ZoneTopology

#: zone index → amounts drawn there, per resource column
Placement = dict[int, list[int]]
#: one unit projected on the node's resource columns: (column, amount) for each positive amount
Need = tuple[tuple[int, int], ...]


def project(unit: Mapping[str, int], resources: tuple[str, ...], aligned: frozenset[str]) -> Need:
    """A unit's positive amounts on the columns of the resources the kubelet aligns here."""
    return tuple((i, unit[r]) for i, r in enumerate(resources) if r in aligned and unit.get(r, 0) > 0)


def _fits(avail: Sequence[Sequence[int]], need: Need, zones: Sequence[int]) -> bool:
    return all(sum(avail[z][i] for z in zones) >= amount for i, amount in need)


def _single(avail: Sequence[Sequence[int]], need: Need) -> list[int] | None:
    for z in range(len(avail)):
        if all(avail[z][i] >= amount for i, amount in need):
            return [z]
    return None


def _width(prefix: tuple[int, ...], amount: int) -> int | None:
    """The fewest zones whose largest Allocatable values sum to `amount` (None: not even all of them)."""
    for k, total in enumerate(prefix):
        if total >= amount:
            return k + 1
    return None


def _restricted(topo: ZoneTopology, avail: Sequence[Sequence[int]], need: Need) -> list[int] | None:
    width = None
    for i, amount in need:
        w = _width(topo.prefix[i], amount)
        if w is None or (width is not None and w != width):
            return None
        width = w
    if width is None:
        return []  # nothing aligned is requested: trivially aligned
    if width == 1:
        return _single(avail, need)
    for mask in combinations(range(len(avail)), width):
        if _fits(avail, need, mask):
            return list(mask)
    return None


def _best_effort(avail: Sequence[Sequence[int]], need: Need) -> list[int] | None:
    remaining = {i: amount for i, amount in need}
    mask: list[int] = []
    while len(mask) < len(avail):
        if all(r <= 0 for r in remaining.values()):
            return mask
        best, best_cover = -1, 0
        for z in range(len(avail)):
            if z in mask:
                continue
            cover = sum(min(r, avail[z][i]) for i, r in remaining.items() if r > 0)
            if cover > best_cover:
                best, best_cover = z, cover
        if best < 0:
            break
        mask.append(best)
        for i in remaining:
            remaining[i] -= avail[best][i]
    return mask if all(r <= 0 for r in remaining.values()) else None


def fit(topo: ZoneTopology, avail: Sequence[Sequence[int]], need: Need) -> list[int] | None:
    """The zones the node's policy picks for one unit under `avail`, or None."""
    if topo.policy == "single-numa-node":
        return _single(avail, need)
    if topo.policy == "best-effort":
        return _best_effort(avail, need)
    return _restricted(topo, avail, need)


def solve(topo: ZoneTopology, available: Amounts, concurrent: Sequence[Need], serial: Sequence[Need]
          ) -> Placement | None:
    """The placement of the concurrent units (each drawn across its mask, lowest zone first), or None
    when a unit, concurrent or serial, cannot be aligned."""
    avail = [list(zone) for zone in available]
    placement: Placement = {}
    for need in concurrent:
        mask = fit(topo, avail, need)
        if mask is None:
            return None
        for i, amount in need:
            for z in mask:
                if amount <= 0:
                    break
                take = min(avail[z][i], amount)
                if take <= 0:
                    continue
                avail[z][i] -= take
                placement.setdefault(z, [0] * len(topo.resources))[i] += take
                amount -= take
    for need in serial:
        if fit(topo, available, need) is None:
            return None
    return placement
