"""Make room's units (room.py): an option — taking some pods off one node lets it take `gain` more of the target's
pods — its cost (pods moved, then CPUs moved), the options found so far per node, and the cost-to-go table the
best-first search over combinations is guided by (a knapsack over the shortfall)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .room_moves import RunningPod

INF = (1 << 60, 0)

Cost = tuple[int, int]  # (pods moved, CPUs moved), compared in that order


@dataclass(frozen=True)
class Option:
    """Taking `pods` off node `node` lets `gain` more target pods onto it."""

    node: str
    pods: tuple[RunningPod, ...]
    gain: int

    @property
    def cost(self) -> Cost:
        return (len(self.pods), sum(p.cpu_count for p in self.pods))


def add_costs(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1])


ComboKey = frozenset[tuple[str, ...]]


def combo_key(options: Iterable[Option]) -> ComboKey:
    return frozenset((o.node, *(p.uid for p in o.pods)) for o in options)


#: a partial combination: (node index, its option) per node chosen so far
Path = tuple[tuple[int, Option], ...]
#: the best-first queue's entries: (cost + cost-to-go, shortfall left, -node index, sequence, cost, node index, path)
Entry = tuple[Cost, int, int, int, Cost, int, Path]


def cost_to_go(gaining: list[list[Option]], short: int, max_moves: int) -> list[list[Cost]]:
    """`best[i][d]`: the cheapest way for the options of nodes i.. (one per node, gaining ones only) to
    gain `d` more target pods within `max_moves` (INF: none), a knapsack table over the shortfall."""
    n = len(gaining)
    best = [[INF] * (short + 1) for _ in range(n + 1)]
    best[n][0] = (0, 0)
    for i in range(n - 1, -1, -1):
        row, nxt = best[i], best[i + 1]
        for d in range(short + 1):
            b = nxt[d]
            for opt in gaining[i]:
                rest = nxt[max(0, d - opt.gain)]
                if rest is not INF:
                    c = add_costs(opt.cost, rest)
                    if c[0] <= max_moves and c < b:
                        b = c
            row[d] = b
    return best



class Found:
    """The options found so far, per node, and `gain`: the target pods they can gain at most
    (the best option of every node together)."""

    def __init__(self) -> None:
        self.by_node: dict[str, list[Option]] = {}
        self.gain = 0

    def add(self, option: Option | None) -> None:
        if option is None:
            return
        known = self.by_node.setdefault(option.node, [])
        if any(o.pods == option.pods for o in known):
            return
        before = max((o.gain for o in known), default=0)
        known.append(option)
        self.gain += max(0, option.gain - before)
