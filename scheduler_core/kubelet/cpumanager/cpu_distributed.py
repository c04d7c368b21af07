"""Which NUMA nodes the distributed CPU selection spreads a request over (ENGINE.md §2.7,
takeByTopologyNUMADistributed), found by branch and bound instead of the kubelet's exhaustive walk.

For k = minK, minK+1, … the kubelet tries every k-combination of the NUMA nodes with free CPUs (in
their accumulator order) and, when `n` does not split evenly, every subset of the combination that
could take the remainder; it keeps the first candidate with the strictly lowest balance score (the
standard deviation of the free CPUs left on every NUMA node) and stops at the first k that has one.
That is C(24, 7) × 127 simulations for 100 CPUs on an empty 24-NUMA machine (minutes). This search
returns the same choice while visiting few candidates:

- **Exact score on integers.** The free CPUs left always total `free − n`, so the score is a
  non-decreasing function of Σ x² alone; computing it on integers makes equal Σ x² an exact tie.
- **Bounds.** No completion of a partial combination does better than taking the remaining members
  with the most free CPUs and spreading the remainder over the largest values one group at a time
  (an exchange argument: reducing a larger value never raises Σ x²). A branch whose bound is not
  strictly below the best score found so far is cut: the kubelet keeps the first of equal scores,
  and the search visits candidates in the kubelet's order.
- **Symmetry.** Two NUMA nodes with the same free count next to each other in the order are
  interchangeable: a candidate that skips the first and takes the second mirrors an earlier one with
  the same score, which the kubelet would keep. Only the first members of such runs are tried; the
  same holds for remainder subsets.
- **Early exit.** A remainder subset that reaches the bound of its whole combination ends that
  combination's search; a score of 0 cuts everything after it.

`standard_deviation` is the kubelet's score (mean and result rounded to 3 decimals, half away from
zero), computed exactly: Go's float64 result differs only where the exact value sits on a rounding
boundary, where Go's own answer depends on its random map iteration order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from math import isqrt

Choice = tuple[tuple[int, ...], tuple[int, ...] | None]


def _div_round(p: int, q: int) -> int:
    """p / q rounded half away from zero, for q > 0."""
    if p >= 0:
        return (2 * p + q) // (2 * q)
    return -((2 * -p + q) // (2 * q))


def balance_milli(size: int, total: int, squares: int) -> int:
    """The balance score in thousandths of `size` values whose sum is `total` and sum of squares
    `squares`: round3(sqrt(Σ (x − round3(mean))² / size)) × 1000, exactly."""
    mean = _div_round(1000 * total, size)  # thousandths
    deviation = 1_000_000 * squares - 2000 * mean * total + size * mean * mean  # Σ (1000x − mean)²
    return (isqrt(4 * deviation // size) + 1) // 2


def standard_deviation(values: Iterable[int]) -> float:
    """The distributed algorithm's balance score: population standard deviation with the mean and
    the result rounded to 3 decimals, half away from zero (Go's math.Round, not banker's)."""
    xs = list(values)
    if not xs:
        return 0.0
    return balance_milli(len(xs), sum(xs), sum(x * x for x in xs)) / 1000


def _fill(values: list[int], limits: list[int] | None, groups: int, group: int) -> int | None:
    """Σ x² of `values` after taking `groups` groups of `group`, each from the largest value that
    still holds one (and, with `limits`, has given fewer than its limit): the least Σ x² any such
    placement reaches. None if they do not fit."""
    if groups == 0:
        return sum(v * v for v in values)
    if limits is None:
        heap = [(-v, groups) for v in values]
    else:
        heap = [(-v, n) for v, n in zip(values, limits, strict=True)]
    settled = sum(v * v for v, n in heap if n <= 0)
    heap = [e for e in heap if e[1] > 0]
    heapq.heapify(heap)
    for _ in range(groups):
        if not heap or -heap[0][0] < group:
            return None
        v, n = heap[0]
        if n == 1:
            heapq.heappop(heap)
            settled += (v + group) ** 2
        else:
            heapq.heapreplace(heap, (v + group, n - 1))
    return settled + sum(v * v for v, _ in heap)


def _rounds(caps: list[int], more: int, least: int, groups: int) -> int:
    """An upper bound on the rounds the simulation runs to place `groups`: the first r at which the
    prefix (`caps`) and `more` members holding at least `least` groups each surely hold them."""
    r = 1
    while True:
        held = sum(min(c, r) for c in caps) + more * min(least, r)
        if held >= groups:
            return r
        if r >= groups:
            return groups
        r += 1


def _descending_tails(values: Sequence[int], keep: Sequence[bool]) -> list[list[int]]:
    """tails[p] = the kept values at positions ≥ p, largest first."""
    tails: list[list[int]] = [[] for _ in range(len(values) + 1)]
    for p in range(len(values) - 1, -1, -1):
        tail = tails[p + 1]
        if keep[p]:
            tail = sorted((*tail, values[p]), reverse=True)
        tails[p] = tail
    return tails


class _Search:
    """The kubelet's choice for one k: the first combination (and remainder subset) with the lowest
    balance score, by depth-first search in the kubelet's order with the cuts above."""

    def __init__(self, counts: Sequence[int], n: int, group: int, k: int) -> None:
        self.counts = counts
        self.n = n
        self.group = group
        self.k = k
        self.spread = (n // k // group) * group
        self.remainder = n - self.spread * k
        self.size = len(counts)
        self.total = sum(counts) - n
        self.squares = sum(c * c for c in counts)
        self.tails = _descending_tails(counts, [c >= self.spread for c in counts])
        self.best = 1 << 62  # beats any score
        self.choice: Choice | None = None

    def score(self, squares: int) -> int:
        return balance_milli(self.size, self.total, squares)

    def run(self) -> Choice | None:
        self._combos([], 0, 0, 0)
        return self.choice

    # -- combinations ------------------------------------------------------------------------------
    def _combo_bound(self, members: list[int], free: int, groups: int, start: int) -> int | None:
        """Lowest score any completion of `members` (counts) with positions ≥ start can reach."""
        top = self.tails[start][:self.k - len(members)]
        if len(members) + len(top) < self.k:
            return None
        g = self.group
        if free + sum(top) < self.n or g * (groups + sum(t // g for t in top)) < self.n:
            return None
        chosen = members + top
        d = self.spread
        filled = _fill([c - d for c in chosen], None, self.remainder // g, g)
        if filled is None:
            return None
        return self.score(self.squares - sum(c * c for c in chosen) + filled)

    def _combos(self, chosen: list[int], free: int, groups: int, start: int) -> None:
        counts, g = self.counts, self.group
        members = [counts[p] for p in chosen]
        for p in range(start, self.size):
            c = counts[p]
            if c < self.spread or (p > start and counts[p - 1] == c):
                continue  # too few free CPUs, or the mirror of taking p - 1
            bound = self._combo_bound([*members, c], free + c, groups + c // g, p + 1)
            if bound is None or bound >= self.best:
                continue
            if len(chosen) + 1 == self.k:
                self._combination((*chosen, p), bound)
            else:
                self._combos([*chosen, p], free + c, groups + c // g, p + 1)

    def _combination(self, combo: tuple[int, ...], bound: int) -> None:
        counts, d, g = self.counts, self.spread, self.group
        after = [counts[p] - d for p in combo]
        squares = self.squares - sum(counts[p] ** 2 for p in combo) + sum(a * a for a in after)
        if self.remainder == 0:
            score = self.score(squares)
            if score < self.best:
                self.best, self.choice = score, (combo, None)
            return
        takers = [(p, a) for p, a in zip(combo, after, strict=True) if a >= g]
        subsets = _Subsets(self, takers, squares, bound)
        found = subsets.run()
        if found is not None:
            self.best, self.choice = subsets.best, (combo, found)


class _Subsets:
    """The first remainder subset with the lowest score (subsets by size descending, then in
    order), searched like the combinations, and cut at the current best combination's score."""

    def __init__(self, search: _Search, takers: list[tuple[int, int]], squares: int, floor: int) -> None:
        self.search = search
        self.positions = [p for p, _ in takers]
        self.after = [a for _, a in takers]
        self.squares = squares
        self.floor = floor  # no subset of this combination scores lower
        self.best = search.best
        self.found: tuple[int, ...] | None = None
        self.tails = _descending_tails(self.after, [True] * len(takers))
        self.groups = search.remainder // search.group
        # least[p]: the fewest groups any member at position ≥ p holds.
        self.least = [min((a // search.group for a in self.after[p:]), default=0) for p in range(len(takers) + 1)]

    def run(self) -> tuple[int, ...] | None:
        # A first guess bounds the answer from above: for each size, the members with the most free
        # CPUs. A branch above it cannot hold the answer (one level with it still can: the kubelet
        # keeps the first of equal scores).
        by_size = sorted(range(len(self.after)), key=lambda i: -self.after[i])
        self.ceiling = min((self._simulate(tuple(sorted(by_size[:size]))) for size in range(1, len(by_size) + 1)),
                           default=self.best)
        for size in range(len(self.after), 0, -1):
            bound = self._bound([], 0, size)
            if bound is not None and bound < self.best and bound <= self.ceiling:
                self._visit([], 0, size)
            if self.best <= self.floor:
                break
        return self.found

    def _bound(self, values: list[int], start: int, size: int) -> int | None:
        """Lowest score of a `size`-member subset that starts with `values`, the rest after `start`.

        The simulation hands out rounds: while q groups remain, every member with a group left
        gives one, in order. So with more members than groups exactly the first q give one each;
        otherwise every member gives at least min(its groups, q // size), and none gives more than
        the number of rounds, which the prefix and the smallest members left bound from above."""
        top = self.tails[start][:size - len(values)]
        if len(values) + len(top) < size:
            return None
        s = self.search
        g = s.group
        q = self.groups
        if size > q:
            takers = values[:q] + top[:q - len(values)] if len(values) < q else values[:q]
            return s.score(self.squares + sum((a - g) ** 2 - a * a for a in takers))
        caps = [a // g for a in values]
        level = q // size
        more = size - len(values)
        least = self.least[start]
        rounds = _rounds(caps, more, least, q)
        if rounds <= level + 1 and (more == 0 or least >= level):
            return self._bound_in_rounds(values, caps, top, level)
        forced = [min(c, level) for c in caps]
        rest = q - sum(forced)
        if rest < 0:
            return None
        chosen = [a - g * f for a, f in zip(values, forced, strict=True)] + top
        limits = [min(c, rounds) - f for c, f in zip(caps, forced, strict=True)] + [min(a // g, rounds) for a in top]
        filled = _fill(chosen, limits, rest, g)
        if filled is None:
            return None
        return s.score(self.squares - sum(a * a for a in values) - sum(a * a for a in top) + filled)

    def _bound_in_rounds(self, values: list[int], caps: list[int], top: list[int], level: int) -> int | None:
        """`_bound` when the simulation surely runs `level` whole rounds and at most one more: every
        member gives min(its groups, level), and the groups left over go one each to the first
        members that still hold one, so the prefix's share is known exactly."""
        s = self.search
        g = s.group
        extras = self.groups - sum(min(c, level) for c in caps) - len(top) * level
        if extras < 0:
            return None
        change = 0
        for a, c in zip(values, caps, strict=True):
            given = min(c, level)
            if extras and c > level:
                given += 1
                extras -= 1
            change += (a - g * given) ** 2 - a * a
        for a in top:  # largest first: the leftover groups go to the largest members after the prefix
            given = level
            if extras and a // g > level:
                given += 1
                extras -= 1
            change += (a - g * given) ** 2 - a * a
        if extras:
            return None
        return s.score(self.squares + change)

    def _visit(self, chosen: list[int], start: int, size: int) -> None:
        after = self.after
        values = [after[i] for i in chosen]
        for i in range(start, len(after)):
            a = after[i]
            if i > start and after[i - 1] == a:
                continue  # the mirror of taking i - 1
            bound = self._bound([*values, a], i + 1, size)
            if bound is None or bound >= self.best or bound > self.ceiling:
                continue
            if len(chosen) + 1 == size:
                self._evaluate((*chosen, i))
            elif len(chosen) + 1 >= self.groups and size > self.groups:
                # One round and the givers already chosen: every completion scores the same, and
                # the first in order takes the next members.
                self._evaluate((*chosen, *range(i, i + size - len(chosen))))
            else:
                self._visit([*chosen, i], i + 1, size)
            if self.best <= self.floor:
                return

    def _simulate(self, subset: tuple[int, ...]) -> int:
        """The kubelet's simulation: one group per member per round, in order, until placed; the
        score left (a subset that cannot take the remainder scores above everything)."""
        s = self.search
        g = s.group
        left = [self.after[i] for i in subset]
        if g * sum(a // g for a in left) < s.remainder:
            return 1 << 62
        rest = s.remainder
        while rest > 0:
            for j, value in enumerate(left):
                if rest == 0:
                    break
                if value >= g:
                    left[j] = value - g
                    rest -= g
        return s.score(self.squares - sum(self.after[i] ** 2 for i in subset) + sum(v * v for v in left))

    def _evaluate(self, subset: tuple[int, ...]) -> None:
        score = self._simulate(subset)
        if score < self.best:
            self.best = score
            self.found = tuple(self.positions[i] for i in subset)


def select_numa_nodes(counts: Sequence[int], n: int, group: int, total_numa: int, total_cpus: int
                      ) -> Choice | None:
    """The distributed algorithm's choice (ENGINE.md §2.7): `counts` are the free CPUs of
    the NUMA nodes with any, in accumulator order; returns (positions of the combination, positions
    of the remainder subset or None when `n` splits evenly), or None when no k has a candidate (the
    caller then falls back to the packed algorithm)."""
    groups = -(-total_cpus // group)
    per_numa = -(-groups // total_numa)
    needed = -(-n // group)
    for k in range(-(-needed // per_numa), min(needed, len(counts)) + 1):
        choice = _Search(counts, n, group, k).run()
        if choice is not None:
            return choice
    return None
