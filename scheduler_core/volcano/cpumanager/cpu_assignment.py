"""Volcano's own CPU selection: the old copy of the kubelet's `takeByTopology` that the numa-aware
plugin keeps in its CPU provider, quirks included, and Go's `sort.Slice` that its orderings need.

Volcano predicts (and scores) with this selection; the kubelet then pins with its own algorithm
(the kubelet's `cpu_assignment.take_by_topology`), so the two can differ: that gap is what a session shows as predicted
versus admitted. The quirks (ENGINE.md §3.5):

- whole "sockets" are those whose *id* is also the id of an available CPU;
- whole "cores" are core ids (the exporter numbers cores per socket, so one id names a core on
  every socket) that are also available CPU ids; taking one takes that id on every socket, so the
  result can be larger than the request;
- the socket order of the core step comes from Go's map order through a non-strict sort: where
  that order changes the outcome, the selection is flagged `order_dependent` (this engine starts
  from ascending ids);
- the single-thread step sorts cores with a non-strict predicate, so the exact Go sort decides.

Everything runs on int masks; results are cached per (topology, available CPUs, count).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from itertools import pairwise, permutations
from typing import NamedTuple, TypeVar

from ...errors import InsufficientResourcesError

NOT_ENOUGH = "not enough cpus available to satisfy request"
FAILED = "failed to allocate cpus"
#: beyond this many sockets the start orders are not enumerated; a non-strict order is then flagged as is
_ORDER_CHECK_SOCKETS = 6

T = TypeVar("T")
#: Go's `less(i, j)` over the items themselves
Less = Callable[[T, T], bool]


class Selection(NamedTuple):
    """CPUs Volcano's takeByTopology picks, and whether upstream could have picked others (Go map order)."""

    cpus: int
    order_dependent: bool = False


class VolcanoCPUTopology:
    """The `CPUTopology` Volcano's CPU provider builds from a Numatopology's per-CPU detail
    (`{cpu: (numa, socket, core)}`, core ids as the exporter reports them), with int-mask indexes."""

    def __init__(self, detail: Mapping[int, tuple[int, int, int]]) -> None:
        self.all = 0
        self.socket_cpus: dict[int, int] = {}
        self.core_cpus: dict[int, int] = {}  # core id -> its CPUs on every socket
        socket_core: dict[int, dict[int, int]] = {}
        for cpu, (_numa, socket, core) in sorted(detail.items()):
            bit = 1 << cpu
            self.all |= bit
            self.socket_cpus[socket] = self.socket_cpus.get(socket, 0) | bit
            self.core_cpus[core] = self.core_cpus.get(core, 0) | bit
            per = socket_core.setdefault(socket, {})
            per[core] = per.get(core, 0) | bit
        self.socket_ids = tuple(sorted(self.socket_cpus))
        self.core_ids = tuple(sorted(self.core_cpus))
        #: socket -> ((core id, that core's CPUs on this socket), ...) by core id
        self.socket_cores = {s: tuple(sorted(per.items())) for s, per in socket_core.items()}
        #: core id -> socket of the lowest CPU carrying that core id (what the thread step sorts by)
        self.core_socket = {c: detail[(m & -m).bit_length() - 1][1] for c, m in self.core_cpus.items()}
        num_cpus = len(detail)
        num_cores = sum(len(per) for per in socket_core.values())
        self.cpus_per_core = num_cpus // num_cores if num_cores else 0
        self.cpus_per_socket = num_cpus // len(self.socket_ids) if self.socket_ids else 0


# ------------------------------------------------------------------------------------------------
# Go's sort.Slice (pattern-defeating quicksort, Go >= 1.19), for predicates that are not strict orders
# ------------------------------------------------------------------------------------------------


def go_sort_slice(data: list[T], less: Less[T]) -> None:
    """Sort `data` in place exactly as Go's `sort.Slice(data, less)` would, comparison for comparison."""
    n = len(data)
    _pdqsort(data, 0, n, n.bit_length(), less)


def _insertion(data: list[T], a: int, b: int, less: Less[T]) -> None:
    for i in range(a + 1, b):
        j = i
        while j > a and less(data[j], data[j - 1]):
            data[j], data[j - 1] = data[j - 1], data[j]
            j -= 1


def _sift_down(data: list[T], lo: int, hi: int, first: int, less: Less[T]) -> None:
    root = lo
    while True:
        child = 2 * root + 1
        if child >= hi:
            return
        if child + 1 < hi and less(data[first + child], data[first + child + 1]):
            child += 1
        if not less(data[first + root], data[first + child]):
            return
        data[first + root], data[first + child] = data[first + child], data[first + root]
        root = child


def _heapsort(data: list[T], a: int, b: int, less: Less[T]) -> None:
    first, hi = a, b - a
    for i in range((hi - 1) // 2, -1, -1):
        _sift_down(data, i, hi, first, less)
    for i in range(hi - 1, -1, -1):
        data[first], data[first + i] = data[first + i], data[first]
        _sift_down(data, 0, i, first, less)


_INCREASING, _DECREASING, _UNKNOWN = 1, 2, 0
_MASK64 = (1 << 64) - 1


def _pdqsort(data: list[T], a: int, b: int, limit: int, less: Less[T]) -> None:
    was_balanced = was_partitioned = True
    while True:
        length = b - a
        if length <= 12:
            _insertion(data, a, b, less)
            return
        if limit == 0:
            _heapsort(data, a, b, less)
            return
        if not was_balanced:
            _break_patterns(data, a, b)
            limit -= 1
        pivot, hint = _choose_pivot(data, a, b, less)
        if hint == _DECREASING:
            data[a:b] = data[a:b][::-1]
            pivot = (b - 1) - (pivot - a)
            hint = _INCREASING
        if was_balanced and was_partitioned and hint == _INCREASING and _partial_insertion(data, a, b, less):
            return
        if a > 0 and not less(data[a - 1], data[pivot]):
            a = _partition_equal(data, a, b, pivot, less)
            continue
        mid, was_partitioned = _partition(data, a, b, pivot, less)
        left, right = mid - a, b - mid
        threshold = length // 8
        if left < right:
            was_balanced = left >= threshold
            _pdqsort(data, a, mid, limit, less)
            a = mid + 1
        else:
            was_balanced = right >= threshold
            _pdqsort(data, mid + 1, b, limit, less)
            b = mid


def _partition(data: list[T], a: int, b: int, pivot: int, less: Less[T]) -> tuple[int, bool]:
    data[a], data[pivot] = data[pivot], data[a]
    i, j = a + 1, b - 1
    while i <= j and less(data[i], data[a]):
        i += 1
    while i <= j and not less(data[j], data[a]):
        j -= 1
    if i > j:
        data[j], data[a] = data[a], data[j]
        return j, True
    data[i], data[j] = data[j], data[i]
    i += 1
    j -= 1
    while True:
        while i <= j and less(data[i], data[a]):
            i += 1
        while i <= j and not less(data[j], data[a]):
            j -= 1
        if i > j:
            break
        data[i], data[j] = data[j], data[i]
        i += 1
        j -= 1
    data[j], data[a] = data[a], data[j]
    return j, False


def _partition_equal(data: list[T], a: int, b: int, pivot: int, less: Less[T]) -> int:
    data[a], data[pivot] = data[pivot], data[a]
    i, j = a + 1, b - 1
    while True:
        while i <= j and not less(data[a], data[i]):
            i += 1
        while i <= j and less(data[a], data[j]):
            j -= 1
        if i > j:
            return i
        data[i], data[j] = data[j], data[i]
        i += 1
        j -= 1


def _partial_insertion(data: list[T], a: int, b: int, less: Less[T]) -> bool:
    i = a + 1
    for _ in range(5):
        while i < b and not less(data[i], data[i - 1]):
            i += 1
        if i == b:
            return True
        if b - a < 50:
            return False
        data[i], data[i - 1] = data[i - 1], data[i]
        if i - a >= 2:
            for j in range(i - 1, 0, -1):
                if not less(data[j], data[j - 1]):
                    break
                data[j], data[j - 1] = data[j - 1], data[j]
        if b - i >= 2:
            for j in range(i + 1, b):
                if not less(data[j], data[j - 1]):
                    break
                data[j], data[j - 1] = data[j - 1], data[j]
    return False


def _break_patterns(data: list[T], a: int, b: int) -> None:
    length = b - a
    if length < 8:
        return
    state = length
    modulus = 1 << length.bit_length()
    for idx in range(a + (length // 4) * 2 - 1, a + (length // 4) * 2 + 2):
        state ^= (state << 13) & _MASK64
        state ^= state >> 17
        state ^= (state << 5) & _MASK64
        other = state & (modulus - 1)
        if other >= length:
            other -= length
        data[idx], data[a + other] = data[a + other], data[idx]


def _choose_pivot(data: list[T], a: int, b: int, less: Less[T]) -> tuple[int, int]:
    length = b - a
    swaps = [0]
    i, j, k = a + length // 4, a + length // 4 * 2, a + length // 4 * 3
    if length >= 8:
        if length >= 50:
            i = _median(data, i - 1, i, i + 1, swaps, less)
            j = _median(data, j - 1, j, j + 1, swaps, less)
            k = _median(data, k - 1, k, k + 1, swaps, less)
        j = _median(data, i, j, k, swaps, less)
    if swaps[0] == 0:
        return j, _INCREASING
    if swaps[0] == 12:
        return j, _DECREASING
    return j, _UNKNOWN


def _median(data: list[T], a: int, b: int, c: int, swaps: list[int], less: Less[T]) -> int:
    def order2(x: int, y: int) -> tuple[int, int]:
        if less(data[y], data[x]):
            swaps[0] += 1
            return y, x
        return x, y

    a, b = order2(a, b)
    b, c = order2(b, c)
    a, b = order2(a, b)
    return b


# ------------------------------------------------------------------------------------------------
# takeByTopology
# ------------------------------------------------------------------------------------------------


def take_by_topology(topology: VolcanoCPUTopology, available: int, count: int) -> Selection:
    """`count` CPUs out of `available` as Volcano's scheduler picks them. CPUs unknown to the
    topology are dropped first. Raises `InsufficientResourcesError` with upstream's texts
    (`not enough cpus available to satisfy request`, `failed to allocate cpus`)."""
    return _take(topology, available & topology.all, count)


@lru_cache(maxsize=8192)
def _take(topo: VolcanoCPUTopology, free: int, need: int) -> Selection:
    result = 0
    if need < 1:
        return Selection(0)
    if need > free.bit_count():
        raise InsufficientResourcesError(NOT_ENOUGH)
    # 1. whole "sockets": socket ids that are also ids of available CPUs
    per_socket = topo.cpus_per_socket
    if need >= per_socket:
        for s in [s for s in topo.socket_ids if free & topo.socket_cpus[s] and free >> s & 1]:
            got = free & topo.socket_cpus[s]
            result |= got
            free &= ~got
            need -= got.bit_count()
            if need < 1:
                return Selection(result)
            if need < per_socket:
                break
    if need < topo.cpus_per_core:
        return Selection(_take_threads(topo, free, result, need))
    # 2. whole "cores", socket by socket in an order Go's map iteration may change
    sockets = [s for s in topo.socket_ids if free & topo.socket_cpus[s]]
    count = {s: sum(1 for c, m in topo.socket_cores[s] if free & m and free >> c & 1) for s in sockets}

    def fewer_cores(a: int, b: int) -> bool:
        return count[a] < count[b] or a < b

    chosen = _finish(topo, free, result, need, _sorted(list(sockets), fewer_cores))
    order_dependent = False
    if not all(count[a] <= count[b] for a, b in pairwise(sockets)):
        # a higher socket id with fewer cores: the predicate says both "a before b" and "b before a"
        if len(sockets) > _ORDER_CHECK_SOCKETS:
            order_dependent = True
        else:
            orders = {tuple(_sorted(list(start), fewer_cores)) for start in permutations(sockets)}
            order_dependent = any(_finish(topo, free, result, need, list(o)) != chosen for o in orders)
    return Selection(chosen, order_dependent)


def _sorted(items: list[int], less: Less[int]) -> list[int]:
    go_sort_slice(items, less)
    return items


def _finish(topo: VolcanoCPUTopology, free: int, result: int, need: int, sockets: list[int]) -> int:
    """Step 2 over `sockets` in the given order, then step 3."""
    per_core = topo.cpus_per_core
    cores: list[int] = []
    for s in sockets:
        cores.extend(c for c, m in topo.socket_cores[s] if free & m and free >> c & 1)
    for c in cores:
        got = free & topo.core_cpus[c]
        result |= got
        free &= ~got
        need -= got.bit_count()
        if need < 1:
            return result
        if need < per_core:
            break
    return _take_threads(topo, free, result, need)


def _take_threads(topo: VolcanoCPUTopology, free: int, result: int, need: int) -> int:
    """3. single threads, cores sorted by (CPUs of the result on the core's socket, descending; free
    CPUs on that socket; free CPUs of the core id; socket; core id), as a non-strict OR of those."""
    socket_cpus, core_cpus, core_socket = topo.socket_cpus, topo.core_cpus, topo.core_socket
    cores = [c for c in topo.core_ids if free & core_cpus[c]]
    keys: dict[int, tuple[int, int, int, int]] = {}
    for c in cores:
        s = core_socket[c]
        keys[c] = ((socket_cpus[s] & result).bit_count(), (free & socket_cpus[s]).bit_count(),
                   (free & core_cpus[c]).bit_count(), s)
    if not all(_before(keys[a], keys[b]) for a, b in pairwise(cores)):
        def less(i: int, j: int) -> bool:
            ki, kj = keys[i], keys[j]
            return ki[0] > kj[0] or ki[1] < kj[1] or ki[2] < kj[2] or ki[3] < kj[3] or i < j

        go_sort_slice(cores, less)
    for c in cores:
        group = free & core_cpus[c]
        while group:
            low = group & -group
            result |= low
            group ^= low
            need -= 1
            if need < 1:
                return result
    raise InsufficientResourcesError(FAILED)


def _before(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Whether a core with key `a` and a higher id with key `b` can only sort as (a, b): then
    ascending ids is the one order the predicate allows and no sort is needed."""
    return a[0] >= b[0] and a[1] <= b[1] and a[2] <= b[2] and a[3] <= b[3]
