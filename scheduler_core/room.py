"""Make room (MAKE_ROOM.md): the fewest pod moves after which a pending target fits, NUMA-aligned.

`make_room(cluster, job, profile="aligned", rules=Rules(), priorities=None, held=(), max_moves=8,
time_limit=8.0, max_checks=200, progress=None) -> RoomPlan`

A plan takes pods off nodes, places the target, then re-admits the moved pods (room_moves.py says
exactly how a plan is carried out and when it is valid). The cost is (pods moved, CPUs moved),
compared in that order; evictions, when allowed, are only looked for when no move-only plan exists.

The search, and why it is exact:
1. *Capacity per node.* The target's pods that a dry-run session over one node alone places there
   (`cap(n, X)` with the pods X taken off it), as headroom counts it. For a target whose pods are
   all alike, a session over the cluster places exactly the sum of these (compare.headroom), so a
   set of pods taken off works only if the node gains add up to the target's shortfall.
2. *Options per node.* Every subset X of a node's movable pods (up to `max_moves` of them) with
   `cap(n, X) > cap(n, ∅)`, computed size by size over all nodes, memoised on the node state left.
   Only nodes where taking off every movable pod raises the capacity can gain at all.
3. *Combinations in cost order.* A best-first search over nodes with an exact cost-to-go (a
   knapsack table over the shortfall) yields combinations of options in increasing cost. Each is
   carried out on a copy: the target's session, then a depth-first search for where the moved pods
   are admitted again (their own node first, then every other node by name), then the whole plan
   once more from scratch (`carry_out`) — a plan that fails is never returned. The first to pass is
   the minimum when the options were complete (no time or size bound hit) and the pods alike;
   `minimal` says so, and `lower_bound` is the fewest moves any plan needs, as far as proven.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations

from .errors import RequestError, check_int
from .jobs import Job
from .profiles import Profile, get_profile
from .room_moves import (
    Check,
    Move,
    Rules,
    RunningPod,
    carry_out,
    order_moves,
    put_on,
    running_pods,
    session_ok,
    take_off,
    target_session,
)
from .session import Cluster, Request, _pod_signature

INF = (1 << 60, 0)
MAX_MOVES = 64
MAX_DESTINATION_TRIES = 2000  # admissions one combination may try to re-home its moved pods


@dataclass
class RoomPlan:
    """The answer. `found`: a verified plan (`check` is its carrying out, with the target's session);
    `moves` and `evictions` in the order they are carried out; `minimal`: proven the fewest pods moved,
    then CPUs; `lower_bound`: the fewest pods any plan must move, as proven; `reason`: why none."""

    fits_now: bool
    found: bool
    moves: list[Move] = field(default_factory=list)
    evictions: list[Move] = field(default_factory=list)
    minimal: bool = False
    lower_bound: int = 0
    check: Check | None = None
    reason: str = ""
    stats: dict = field(default_factory=dict)

    @property
    def moved_cpus(self) -> int:
        return sum(m.pod.cpu_count for m in self.moves)

    def to_dict(self, cluster: Cluster) -> dict:
        counts = self.check.result.counts if self.check is not None and self.check.result is not None else None
        return {
            "fits_now": self.fits_now, "found": self.found, "minimal": self.minimal,
            "lower_bound": self.lower_bound, "reason": self.reason,
            "moves": [m.to_dict(cluster) for m in self.moves],
            "evictions": [m.to_dict(cluster) for m in self.evictions],
            "moved_cpus": self.moved_cpus,
            "after": None if counts is None else {"pods_placed": counts["placed"],
                                                  "topology_affinity_errors": counts["topology_affinity_errors"],
                                                  "admission_errors": counts["admission_errors"]},
            "stats": self.stats,
        }


@dataclass(frozen=True)
class _Option:
    """Taking `pods` off node `node` lets `gain` more target pods onto it."""

    node: str
    pods: tuple[RunningPod, ...]
    gain: int

    @property
    def cost(self) -> tuple[int, int]:
        return (len(self.pods), sum(p.cpu_count for p in self.pods))


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] + b[0], a[1] + b[1])


class _Search:
    def __init__(self, cluster: Cluster, job: Job, profile: Profile, rules: Rules, held: frozenset[str],
                 pods: list[RunningPod], max_moves: int, deadline: float, max_checks: int,
                 progress: Callable[[int, int], None] | None) -> None:
        self.cluster, self.job, self.profile, self.rules, self.held = cluster, job, profile, rules, held
        self.max_moves, self.deadline, self.max_checks, self.progress = max_moves, deadline, max_checks, progress
        todo = [pod for _t, pod in job.pods() if pod.uid not in held]
        self.requests = {Request.of(p) for p in todo}
        self.alike = len({_pod_signature(p) for p in todo}) <= 1
        self.need = job.min_available - (len(job.pods()) - len(todo))
        self.probe = replace(job, min_available=1)
        target = {pod.uid for _t, pod in job.pods()} | held
        self.movable: dict[str, list[RunningPod]] = {}
        self.refused: dict[str, int] = {}
        for pod in pods:
            why = rules.refusal(pod, target)
            if why is None:
                self.movable.setdefault(pod.node, []).append(pod)
            else:
                key = why.split(" ")[0] if why.startswith(("namespace", "priority")) else why
                self.refused[key] = self.refused.get(key, 0) + 1
        self.memo: dict[tuple, int] = {}
        self.sessions = 0
        self.complete = True  # every option up to max_moves was evaluated and every re-homing search finished
        self.checks = 0
        self.failures: dict[str, int] = {}

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    # -- capacity ---------------------------------------------------------------------------------
    def cap(self, name: str, off: tuple[RunningPod, ...] = ()) -> int:
        """Target pods a session over node `name` alone places, with `off` taken off it first."""
        one = self.cluster.copy([name])
        for pod in off:
            take_off(one, pod)
        if all(one.fit(name, r) is not None for r in self.requests):
            return 0
        key = (one.static_id(name), one.nodes[name].state_key(), one.tally[name].key())
        found = self.memo.get(key)
        if found is None:
            self.sessions += 1
            result = target_session(one, self.probe, self.profile, self.held)
            counts = result.counts
            found = self.memo[key] = counts["admitted"] if not counts["topology_affinity_errors"] else 0
        return found

    # -- options ----------------------------------------------------------------------------------
    def options(self) -> tuple[int, list[list[_Option]]]:
        """The target pods the cluster takes now (c0) and, per node that can gain, its options."""
        base: dict[str, int] = {}
        total = 0
        for name in sorted(self.cluster.nodes):
            base[name] = self.cap(name)
            total += base[name]
        relevant = [n for n in sorted(self.movable) if self.cap(n, tuple(self.movable[n])) > base[n]]
        found: dict[str, list[_Option]] = {n: [] for n in relevant}
        todo = sum(min(len(self.movable[n]), self.max_moves) for n in relevant)
        done = 0
        for size in range(1, self.max_moves + 1):
            for name in relevant:
                pods = sorted(self.movable[name], key=lambda p: p.uid)
                if size > len(pods):
                    continue
                if self.expired():
                    self.complete = False
                    break
                for subset in combinations(pods, size):
                    gain = self.cap(name, subset) - base[name]
                    if gain > 0:
                        found[name].append(_Option(name, subset, gain))
                done += 1
                if self.progress is not None:
                    self.progress(done, todo)
        return total, [sorted(opts, key=lambda o: o.cost) for n, opts in found.items() if opts]

    # -- combinations -------------------------------------------------------------------------------
    def combinations(self, nodes: list[list[_Option]], short: int) -> Iterator[tuple[tuple[int, int], list[_Option]]]:
        """Combinations of at most one option per node whose gains cover `short`, in increasing cost.
        A combination is yielded only when the fewer-move ones before it are exhausted; when one fails
        its supersets (more options on later nodes) are queued too."""
        n = len(nodes)
        best = [[INF] * (short + 1) for _ in range(n + 1)]
        best[n][0] = (0, 0)
        for i in range(n - 1, -1, -1):
            row, nxt = best[i], best[i + 1]
            for d in range(short + 1):
                b = nxt[d]
                for opt in nodes[i]:
                    rest = nxt[max(0, d - opt.gain)]
                    if rest is not INF:
                        c = _add(opt.cost, rest)
                        if c[0] <= self.max_moves and c < b:
                            b = c
                row[d] = b
        heap: list = []
        seq = 0

        def push(cost: tuple[int, int], i: int, d: int, path: tuple[_Option, ...]) -> None:
            nonlocal seq
            rest = best[i][d] if i <= n else INF
            if rest is INF:
                return
            f = _add(cost, rest)
            if f[0] > self.max_moves:
                return
            seq += 1
            heapq.heappush(heap, (f, d, -i, seq, cost, i, path))

        push((0, 0), 0, short, ())
        while heap:
            _f, d, _mi, _s, cost, i, path = heapq.heappop(heap)
            if d == 0:
                yield cost, list(path)
                for j in range(i, n):  # supersets, looked at only after everything cheaper
                    for opt in nodes[j]:
                        c = _add(cost, opt.cost)
                        if c[0] <= self.max_moves:
                            seq += 1
                            heapq.heappush(heap, (c, 0, -(j + 1), seq, c, j + 1, (*path, opt)))
                continue
            if i == n:
                continue
            push(cost, i + 1, d, path)
            for opt in nodes[i]:
                push(_add(cost, opt.cost), i + 1, max(0, d - opt.gain), (*path, opt))

    # -- one combination ----------------------------------------------------------------------------
    def try_plan(self, pods: list[RunningPod], evict: int) -> list[tuple[RunningPod, str | None]] | None:
        """Where the pods taken off go again (at most `evict` of them evicted instead), or None."""
        work = self.cluster.copy()
        for pod in pods:
            take_off(work, pod)
        result = target_session(work, self.job, self.profile, self.held)
        reason = session_ok(result, self.job)
        if not reason:
            used = {p.node for p in result.pods if p.status == "admitted"}
            if {p.node for p in pods} - used:
                reason = "a node freed is not used by the target"
        if reason:
            self.failures[reason] = self.failures.get(reason, 0) + 1
            return None
        order = order_moves(pods)
        names = sorted(work.nodes)
        tries = [0]
        chosen: list[str | None] = []

        def place(k: int, evicted: int) -> bool:
            if k == len(order):
                return True
            pod = order[k]
            for name in [pod.node, *(n for n in names if n != pod.node)]:
                if tries[0] >= MAX_DESTINATION_TRIES:
                    return False
                tries[0] += 1
                snap = work.snapshot(name)
                if put_on(work, pod, name) is not None:
                    chosen.append(name)
                    if place(k + 1, evicted):
                        return True
                    chosen.pop()
                    work.restore(name, snap)
            if evicted < evict and self.rules.evictable(pod, self.job.priority):
                chosen.append(None)
                if place(k + 1, evicted + 1):
                    return True
                chosen.pop()
            return False

        if place(0, 0):
            return list(zip(order, chosen, strict=True))
        if tries[0] >= MAX_DESTINATION_TRIES:
            self.complete = False
        self.failures["the moved pods cannot all be admitted again"] = (
            self.failures.get("the moved pods cannot all be admitted again", 0) + 1)
        return None

    def search(self, nodes: list[list[_Option]], short: int, evictions: bool
               ) -> tuple[list[tuple[RunningPod, str | None]] | None, Check | None, int, bool]:
        """The first combination that passes, its check, the lower bound proven and whether the
        combinations ran out (rather than the time or the checks)."""
        bound = 1
        for cost, combo in self.combinations(nodes, short):
            bound = cost[0]
            if self.expired() or self.checks >= self.max_checks:
                return None, None, bound, False
            self.checks += 1
            if self.progress is not None:
                self.progress(self.checks, self.max_checks)
            pods = [p for opt in combo for p in opt.pods]
            for evict in range(len(pods) + 1) if evictions else (0,):
                moves = self.try_plan(pods, evict)
                if moves is not None:
                    check = carry_out(self.cluster, self.job, self.profile, self.held, moves, explain=True)
                    if check.ok:
                        return moves, check, cost[0], True
                    self.failures[f"verification: {check.reason}"] = (
                        self.failures.get(f"verification: {check.reason}", 0) + 1)
                    break
        return None, None, self.max_moves + 1, True


def make_room(cluster: Cluster, job: Job, profile: str | Profile = "aligned", rules: Rules | None = None,
              priorities: Mapping[str, int] | None = None, held: Collection[str] = (), max_moves: int = 8,
              time_limit: float = 8.0, max_checks: int = 200,
              progress: Callable[[int, int], None] | None = None) -> RoomPlan:
    """The fewest moves after which `job` places on `cluster` (left unchanged); see the module docstring.
    `priorities`: pod uid → priority (0 when absent); `held`: uids of the job's pods already running."""
    started = time.monotonic()
    if not isinstance(cluster, Cluster):
        raise RequestError(f"make_room needs a Cluster, not {type(cluster).__name__}")
    if not isinstance(job, Job):
        raise RequestError(f"make_room needs a Job, not {type(job).__name__}")
    if check_int(max_moves, "max_moves", 1, field="max_moves") > MAX_MOVES:
        raise RequestError(f"max_moves: at most {MAX_MOVES}, not {max_moves}", "max_moves")
    check_int(max_checks, "max_checks", 1, field="max_checks")
    profile = get_profile(profile)
    rules = rules or Rules()
    held = frozenset(held)
    now = carry_out(cluster, job, profile, held, [], explain=True)
    if now.ok:
        return RoomPlan(True, True, minimal=True, lower_bound=0, check=now,
                        stats={"engine_s": round(time.monotonic() - started, 3)})
    s = _Search(cluster, job, profile, rules, held, running_pods(cluster, priorities), max_moves,
                started + time_limit, max_checks, progress)
    placed_now, nodes = s.options()
    short = s.need - placed_now
    found = None
    check = None
    bound, exhausted = 1, False
    if short > 0:
        found, check, bound, exhausted = s.search(nodes, short, evictions=False)
        if found is None and rules.allow_evictions and exhausted:
            found, check, _b, exhausted = s.search(nodes, short, evictions=True)
    proven = s.complete and s.alike and short > 0
    stats = {"engine_s": round(time.monotonic() - started, 3), "nodes_considered": len(nodes),
             "options": sum(len(o) for o in nodes), "sessions": s.sessions, "checks": s.checks,
             "target_pods_now": placed_now, "shortfall": max(short, 0),
             "not_movable": dict(sorted(s.refused.items())), "failed_checks": dict(sorted(s.failures.items())),
             "bounded": not (s.complete and exhausted) if found is None else not s.complete}
    if found is None:
        if short <= 0:
            reason = ("the target's pods fit one node at a time but not together "
                      f"({now.reason}); no plan of moves was searched")
        elif proven and exhausted:
            reason = f"no plan of at most {max_moves} moves makes room"
        else:
            reason = "no plan within the bounds (time, checks or size)"
        return RoomPlan(False, False, lower_bound=bound if proven else 1, reason=reason, stats=stats)
    moves = [m for m in check.moves if m.to_node is not None]
    evicted = [m for m in check.moves if m.to_node is None]
    return RoomPlan(False, True, moves, evicted, minimal=proven, lower_bound=bound if proven else 1,
                    check=check, stats=stats)


__all__ = ["RoomPlan", "make_room"]
