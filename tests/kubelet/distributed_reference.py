"""The kubelet's exhaustive distributed CPU selection (takeByTopologyNUMADistributed), as the engine
ran it before `scheduler_core.kubelet.cpumanager.cpu_distributed` searched with bounds: every k-combination of NUMA
nodes, every remainder subset, first strictly lowest score wins. Slow (minutes on 24 NUMA nodes),
kept only as the oracle the fast search is tested against."""

import math
from itertools import combinations

from scheduler_core.errors import InsufficientResourcesError
from scheduler_core.kubelet.cpumanager import cpu_assignment as cpu_take
from scheduler_core.kubelet.cpumanager.cpu_distributed import standard_deviation
from scheduler_core.kubelet.cpumanager.cpu_index import cpu_index
from scheduler_core.model.cpuset import CPUSet


def _round3(value: float) -> float:
    """Go's math.Round(v*1000)/1000: half away from zero."""
    x = value * 1000.0
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += math.copysign(1.0, x)
    return t / 1000.0


def float_standard_deviation(values: list[int]) -> float:
    """The kubelet's float64 formula, term by term."""
    if not values:
        return 0.0
    mean = _round3(sum(float(x) for x in values) / len(values))
    var = sum((x - mean) * (x - mean) for x in values) / len(values)
    return _round3(math.sqrt(var))


def exhaustive_choice(counts: list[int], n: int, group: int, total_numa: int, total_cpus: int):
    """(combination positions, remainder positions or None) exactly as the kubelet's loops pick
    them, or None when no k has a candidate."""
    numas = list(range(len(counts)))
    count = dict(enumerate(counts))
    groups = -(-total_cpus // group)
    groups_per_numa = -(-groups // total_numa)
    groups_needed = -(-n // group)
    min_k = -(-groups_needed // groups_per_numa)
    max_k = min(groups_needed, len(numas))
    for k in range(min_k, max_k + 1):
        best_balance = math.inf
        best = None
        for combo in combinations(numas, k):
            if best_balance == 0:
                break
            if sum(count[x] for x in combo) < n:
                continue
            if group * sum(count[x] // group for x in combo) < n:
                continue
            distribution = (n // k // group) * group
            if any(count[x] < distribution for x in combo):
                continue
            after = dict(count)
            for x in combo:
                after[x] -= distribution
            remainder = n - distribution * k
            remainder_combo = [x for x in combo if after[x] >= group]
            local_best = math.inf
            local_remainder = None
            if remainder == 0:
                local_best = standard_deviation(after.values())
            j = len(remainder_combo)
            while remainder > 0 and j >= 1:
                for subset in combinations(remainder_combo, j):
                    if group * sum(after[x] // group for x in subset) < remainder:
                        continue
                    sim = dict(after)
                    r = remainder
                    while r > 0:
                        for x in subset:
                            if r == 0:
                                break
                            if sim[x] < group:
                                continue
                            sim[x] -= group
                            r -= group
                    balance = standard_deviation(sim.values())
                    if balance < local_best:
                        local_best = balance
                        local_remainder = subset
                j -= 1
            if local_best < best_balance:
                best_balance = local_best
                best = (combo, local_remainder)
        if best is not None:
            return best
    return None


def take_distributed(topology, available: CPUSet, n: int, group: int = 1, strategy: str = "packed") -> CPUSet:
    """take_by_topology_numa_distributed with the exhaustive choice."""
    td = cpu_index(topology)
    spread = strategy == "spread"
    avail = available.mask
    if n % group != 0:
        return CPUSet(cpu_take._packed(td, avail, n, spread, False))
    acc = cpu_take._Accumulator(td, avail, n, spread)
    if acc.satisfied:
        return CPUSet()
    if acc.failed:
        raise cpu_take._not_enough(n, avail.bit_count())
    numas = acc.sorted_numa_nodes()
    counts = [(acc.avail & td.numa_mask[x]).bit_count() for x in numas]
    choice = exhaustive_choice(counts, n, group, len(td.numa_ids), td.num_cpus)
    if choice is None:
        return CPUSet(cpu_take._packed(td, avail, n, spread, False))
    combo = [numas[p] for p in choice[0]]
    distribution = (n // len(combo) // group) * group
    for x in combo:
        try:
            got = cpu_take._packed(td, acc.avail & td.numa_mask[x], distribution, spread, False)
        except InsufficientResourcesError:
            got = 0
        acc.take(got)
    remainder = n - distribution * len(combo)
    while remainder > 0:
        progressed = False
        for x in [numas[p] for p in choice[1] or ()]:
            if remainder == 0:
                break
            if (acc.avail & td.numa_mask[x]).bit_count() < group:
                continue
            acc.take(cpu_take._packed(td, acc.avail & td.numa_mask[x], group, spread, False))
            remainder -= group
            progressed = True
        if not progressed:
            break
    if acc.need != 0:
        raise InsufficientResourcesError(f"accounting error, remaining: {acc.need}")
    return CPUSet(acc.result)
