"""NodeResourceTopologyMatch's Score (scheduler-plugins `score.go`, `least_allocated.go`,
`most_allocated.go`, `balanced_allocation.go`, `least_numa.go`). No normalisation: the node's score is
the strategy's 0-100 value (the scheduler multiplies it by the plugin's weight).

- LeastAllocated / MostAllocated / BalancedAllocation score only `single-numa-node` nodes (others 0):
  per zone the strategy's value of the request against the zone's available amounts, then the
  smallest non-zero zone value (`min_zone_score`); pod scope scores the effective request, container
  scope the mean over init and app containers (truncated), each scored alone.
- LeastNUMANodes scores every node by scope: the fewest zones the request needs (a container's zones
  are taken from before the next is counted), `100 - n * (100 // maxNUMANodes)`, plus half a step
  when those zones are also the closest of their size.
- A pod that is not Guaranteed scores 100 everywhere; a node without an NRT object 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from .zones import CONTAINER, POD, SINGLE_NUMA_NODE, PodView, TopologyManagerConf, Zone, suitable, value

MAX_SCORE = 100
LEAST_ALLOCATED, MOST_ALLOCATED, BALANCED_ALLOCATION, LEAST_NUMA_NODES = (
    "LeastAllocated", "MostAllocated", "BalancedAllocation", "LeastNUMANodes")
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, BALANCED_ALLOCATION, LEAST_NUMA_NODES)
#: the distance upstream assumes when a zone lists no cost to another (ACPI SLIT's "unknown")
MAX_DISTANCE = 255

Weights = Mapping[str, int]


def weight(weights: Weights, resource: str) -> int:
    """A resource's weight: 1 when not given or below 1."""
    w = weights.get(resource, 1)
    return w if w >= 1 else 1


def _allocation(most: bool, requested: Mapping[str, int], zones: Sequence[Zone], weights: Weights) -> int:
    """LeastAllocated / MostAllocated through min_zone_score: per zone, the weighted mean over every
    requested resource of `(available - request) * 100 // available` (Least) or `request * 100 // available`
    (Most), in whole units, 0 for a resource the zone lacks or cannot hold."""
    table = [(r, q, value(r, q), weight(weights, r)) for r, q in requested.items()]
    weight_sum = sum(w for _r, _q, _v, w in table)
    scores = []
    for zone in zones:
        available = zone.resources
        total = 0
        for resource, quantity, qv, w in table:
            cap = available.get(resource, 0)
            if cap == 0 or quantity > cap:
                continue
            cv = value(resource, cap)
            total += (qv if most else cv - qv) * MAX_SCORE // cv * w
        scores.append(total // weight_sum if weight_sum else 0)
    return min_zone_score(scores)


def balanced(requested: Mapping[str, int], available: Mapping[str, int]) -> int:
    """1 - the sample variance of the requested fractions, × 100; 0 when one exceeds its zone. With a
    single resource the variance is undefined (NaN in gonum) and Go's conversion of it on amd64 gives
    the smallest int64, which is what upstream returns."""
    fractions = []
    for resource, quantity in requested.items():
        cap = value(resource, available.get(resource, 0))
        fraction = 1.0 if cap == 0 else value(resource, quantity) / cap
        if fraction > 1:
            return 0
        fractions.append(fraction)
    n = len(fractions)
    if n < 2:
        return -(1 << 63)
    mean = sum(fractions) / n
    ss = sum((f - mean) ** 2 for f in fractions)
    comp = sum(f - mean for f in fractions)
    variance = (ss - comp * comp / n) / (n - 1)
    return int((1 - variance) * MAX_SCORE)


def min_zone_score(scores: Sequence[int]) -> int:
    """scoreForEachNUMANode over the zones' scores: the smallest, where a 0 (the request does not fit)
    counts only until some zone scores above it."""
    low = 0
    for s in scores:
        if low == 0 or (s != 0 and s < low):
            low = s
    return low


def zone_score(strategy: str, requested: Mapping[str, int], zones: Sequence[Zone], weights: Weights) -> int:
    """The strategy's node score for one request (a container's, or the pod's effective one)."""
    if strategy == BALANCED_ALLOCATION:
        return min_zone_score([balanced(requested, z.resources) for z in zones])
    return _allocation(strategy == MOST_ALLOCATED, requested, zones, weights)


# -- LeastNUMANodes --------------------------------------------------------------------------------


def _avg_distance(zones: Sequence[Zone], combo: Sequence[int]) -> float:
    if not combo:
        return MAX_DISTANCE
    total = sum(zones[a].costs.get(zones[b].numa_id, MAX_DISTANCE) for a in combo for b in combo)
    return total / (len(combo) * len(combo))


def min_avg_distance(zones: Sequence[Zone], combos: Sequence[Sequence[int]]) -> float:
    """minAvgDistanceInCombinations: the smallest mean distance among the sets (zone list indices)."""
    return min((_avg_distance(zones, c) for c in combos), default=MAX_DISTANCE)


def _fits(zones: Sequence[Zone], guaranteed: bool, requests: Mapping[str, int], combo: Sequence[int]) -> bool:
    if any(r not in zones[i].resources for i in combo for r in requests):
        return False
    for resource, quantity in requests.items():
        if quantity and not suitable(guaranteed, resource, quantity, sum(zones[i].resources[resource] for i in combo)):
            return False
    return True


def numa_nodes_required(zones: Sequence[Zone], guaranteed: bool, requests: Mapping[str, int]
                        ) -> tuple[list[int] | None, bool]:
    """The zone ids of the fewest zones that hold `requests` (the closest such set, then the first in
    combination order), and whether they are the closest of all sets of that size; None if none holds it."""
    n = len(zones)
    for size in range(1, n + 1):
        combos = list(combinations(range(n), size))
        closest = min_avg_distance(zones, combos)
        best, best_distance = None, 256.0
        for combo in combos:
            if not _fits(zones, guaranteed, requests, combo):
                continue
            distance = _avg_distance(zones, combo)
            if distance == closest:
                return [zones[i].numa_id for i in combo], True
            if distance < best_distance:
                best, best_distance = combo, distance
        if best is not None:
            return [zones[i].numa_id for i in best], False
    return None, False


def only_non_numa(zones: Sequence[Zone], requests: Mapping[str, int]) -> bool:
    return not any(r in z.resources for r in requests for z in zones)


def subtract_from_zones(requests: Mapping[str, int], zones: Sequence[Zone], ids: Sequence[int]) -> None:
    """subtractFromNUMAs: take each request from the chosen zones in turn (zones indexed by NUMA id,
    as upstream indexes its list)."""
    for resource, quantity in requests.items():
        for nid in ids:
            if quantity == 0:
                break
            res = zones[nid].resources
            if resource in res:
                taken = min(quantity, res[resource])
                quantity -= taken
                res[resource] -= taken


def least_numa_score(count: int, closest: bool, max_numa_nodes: int) -> int:
    step = MAX_SCORE // max_numa_nodes
    score = MAX_SCORE - count * step
    return score + step // 2 if closest else score


def _least_numa(pod: PodView, zones: Sequence[Zone], conf: TopologyManagerConf) -> int:
    guaranteed = pod.guaranteed
    if conf.scope == POD:
        requests = pod.effective
        if only_non_numa(zones, requests):
            return MAX_SCORE
        ids, closest = numa_nodes_required(zones, guaranteed, requests)
        return 0 if ids is None else least_numa_score(len(ids), closest, conf.max_numa_nodes)
    work = [z.copy() for z in zones]
    most, all_closest = 0, True
    for c in pod.in_order():
        if only_non_numa(work, c.requests):
            continue
        ids, closest = numa_nodes_required(work, guaranteed, c.requests)
        if ids is None:
            return 0
        all_closest = all_closest and closest
        most = max(most, len(ids))
        subtract_from_zones(c.requests, work, ids)
    return MAX_SCORE if most == 0 else least_numa_score(most, all_closest, conf.max_numa_nodes)


def score_pod(pod: PodView, zones: Sequence[Zone] | None, conf: TopologyManagerConf, strategy: str,
              weights: Weights) -> int:
    """The plugin's Score on one node (0-100; the smallest int64 in BalancedAllocation's one-resource case)."""
    if not pod.guaranteed:
        return MAX_SCORE
    if zones is None:
        return 0
    if strategy == LEAST_NUMA_NODES:
        return _least_numa(pod, zones, conf) if conf.scope in (POD, CONTAINER) else 0
    if conf.policy != SINGLE_NUMA_NODE:
        return 0
    if conf.scope == POD:
        return zone_score(strategy, pod.effective, zones, weights)
    scores = [zone_score(strategy, c.requests, zones, weights) for c in pod.in_order()]
    return int(sum(scores) / len(scores)) if scores else 0
