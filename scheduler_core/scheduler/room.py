"""Make room (MAKE_ROOM.md): the fewest pod moves after which a pending target fits, NUMA-aligned.

`make_room(cluster, job, profile="aligned", rules=None, priorities=None, held=(), max_moves=8,
time_limit=8.0, max_checks=200, progress=None) -> RoomPlan`

A plan takes pods off nodes, places the target, then re-admits the moved pods (room_moves.py says
exactly how a plan is carried out and when it is valid). The cost is (pods moved, CPUs moved),
compared in that order; evictions, when allowed, are only looked for when no move-only plan exists.

The search, and why it is exact:
1. *Capacity per node.* The target's pods that a dry-run session over one node alone places there
   (`cap(n, X)` with the pods X taken off it), as headroom counts it. For a target whose pods are
   all alike, a session over the cluster places exactly the sum of these (compare.headroom), so a
   set of pods taken off works only if the node gains add up to the target's shortfall.
2. *Options per node.* Subsets X of a node's movable pods (up to `max_moves` of them) on which the
   target can still place a pod, with their gain `cap(n, X) - cap(n, ∅)`: evaluated in increasing
   (pods, CPUs) over all nodes (a kubelet admission first, a one-node session only where it admits,
   memoised on the node state left); before that, one greedy option on each of the nodes with the
   fewest movable CPUs (`seeds`), for an early plan when no single move gains anything.
3. *Combinations in cost order.* A best-first search over nodes with an exact cost-to-go (a
   knapsack table over the shortfall) yields combinations of options in increasing cost, and after
   a failed one its supersets (gainless options included: chains of moves). Each is carried out on
   a copy: the target's session, then a depth-first search for where the moved pods are admitted
   again (their own node first, then every other node by name), then the whole plan once more from
   scratch (`carry_out`) — a plan that fails is never returned.
4. *Proof and bounds.* Options are evaluated in batches, combinations checked between them. Any plan
   costs at least the first combination not yet checked, or uses an option not yet evaluated and so
   costs at least the next one: a verified plan that costs no more is the minimum (`minimal`, when
   no subset was left out and the target's pods are alike), and the smaller of the two is the
   proven `lower_bound` otherwise. Evaluation stops at EVALUATION_SHARE of `time_limit`; checks stop
   at `time_limit` or `max_checks`.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping
from dataclasses import replace
from itertools import combinations

from ..errors import RequestError, check_int
from ..kubelet.admission import admit_pod
from ..model.jobs import Job
from ..model.node import Node
from .cluster import Cluster, Request, TallyKey
from .explain import PodStatus
from .gc_pause import paused_gc
from .profiles import Profile, get_profile
from .room_moves import (
    Check,
    RoomPlan,
    RoomStats,
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
from .room_options import INF, ComboKey, Cost, Entry, Found, Option, Path, add_costs, combo_key, cost_to_go
from .session import _pod_signature, gang_minimum

MAX_MOVES = 64
MAX_DESTINATION_TRIES = 2000  # admissions one combination may try to re-home its moved pods
EVALUATION_SHARE = 0.5  # of the time left, spent evaluating options before checking combinations
SEED_SHARE = 0.25  # of it at most, spent finding a first option per node greedily
MAX_NODE_PODS = 16  # a node with more movable pods offers subsets of its smallest ones only


class _Search:
    """One make-room question: the options found so far, the combinations tried and the best plan."""

    def __init__(self, cluster: Cluster, job: Job, profile: Profile, rules: Rules, held: frozenset[str],
                 pods: list[RunningPod], max_moves: int, deadline: float, max_checks: int,
                 progress: Callable[[int, int], None] | None) -> None:
        self.cluster, self.job, self.profile, self.rules, self.held = cluster, job, profile, rules, held
        self.max_moves, self.deadline, self.max_checks, self.progress = max_moves, deadline, max_checks, progress
        todo = [pod for _t, pod in job.pods() if pod.uid not in held]
        self.shapes = list({_pod_signature(p): p for p in todo}.values())
        self.requests = {Request.of(p) for p in todo}
        self.alike = len(self.shapes) <= 1
        self.need = gang_minimum(job) - (len(job.pods()) - len(todo))
        self.probe = replace(job, min_available=1)
        target = {pod.uid for _t, pod in job.pods()} | held
        self.movable: dict[str, list[RunningPod]] = {}
        self.refused: dict[str, int] = {}
        for pod in pods:
            why = rules.refusal(pod, target)
            if why is None:
                self.movable.setdefault(pod.node, []).append(pod)
            else:
                key = why.split(" ")[0] if why.startswith(("namespace", "priority", "PodDisruptionBudget")) else why
                self.refused[key] = self.refused.get(key, 0) + 1
        self.memo: dict[tuple[int, Hashable, TallyKey], int] = {}
        self.base: dict[str, int] = {}
        self.sessions = 0
        self.evaluated = 0
        self.truncated = False  # subsets (of 2 pods or more) of a node with too many movable pods were left out
        self.gave_up = False  # a re-homing search stopped at its budget: a combination may have failed wrongly
        self.checks = 0
        self.failed: set[ComboKey] = set()
        self.failures: dict[str, int] = {}

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    @property
    def complete(self) -> bool:
        return not (self.truncated or self.gave_up)

    def lower_bound(self, bound: int) -> int:
        """The fewest moves any plan needs, from the search's bound: a subset left out has 2 pods or
        more; a combination given up on may have been a plan."""
        if self.gave_up or not self.alike:
            return 1
        return min(bound, 2) if self.truncated else bound

    def fail(self, reason: str) -> None:
        self.failures[reason] = self.failures.get(reason, 0) + 1

    # -- capacity ---------------------------------------------------------------------------------
    def cap(self, name: str, off: tuple[RunningPod, ...] = ()) -> int:
        """Target pods a session over node `name` alone places and the kubelet admits, with `off`
        taken off it first (0 when any is refused: such a node breaks every plan it is part of)."""
        one = self.cluster.copy([name])
        for pod in off:
            take_off(one, pod)
        node = one.nodes[name]
        if all(one.fit(name, r) is not None for r in self.requests):
            return 0
        key = (one.static_id(name), node.state_key(), one.tally[name].key())
        found = self.memo.get(key)
        if found is None:
            if not any(admit_pod(node, shape, commit=False).admitted for shape in self.shapes):
                found = 0  # the kubelet takes none of the target's pods here: no session can place one
            else:
                self.sessions += 1
                counts = target_session(one, self.probe, self.profile, self.held).counts
                found = counts["admitted"] if not counts["topology_affinity_errors"] else 0
            self.memo[key] = found
        return found

    # -- options, in increasing cost ----------------------------------------------------------------
    def candidates(self) -> Iterator[tuple[tuple[int, int], str, tuple[RunningPod, ...]]]:
        """Every (node, pods taken off it) in increasing (pods, CPUs): size by size over all nodes. A
        node with more than MAX_NODE_PODS movable pods offers subsets of its smallest ones only."""
        for size in range(1, self.max_moves + 1):
            level = []
            for name, pods in self.movable.items():
                pods = sorted(pods, key=lambda p: (p.cpu_count, p.uid))
                if len(pods) > MAX_NODE_PODS and size > 1:
                    self.truncated = True
                    pods = pods[:MAX_NODE_PODS]
                level += [((size, sum(p.cpu_count for p in sub)), name, sub) for sub in combinations(pods, size)]
            level.sort(key=lambda c: (c[0], c[1], [p.uid for p in c[2]]))
            yield from level

    def evaluate(self, name: str, pods: tuple[RunningPod, ...]) -> Option | None:
        self.evaluated += 1
        base = self.base.get(name)
        if base is None:
            base = self.base[name] = self.cap(name)
        cap = self.cap(name, pods)
        return Option(name, pods, cap - base) if cap else None

    # -- combinations -------------------------------------------------------------------------------
    def combinations(self, found: dict[str, list[Option]], short: int
                     ) -> Iterator[tuple[Cost, list[Option]]]:
        """Combinations of at most one option per node whose gains cover `short`, in increasing cost
        (best-first, with the exact cost-to-go of a knapsack table over the shortfall). Once one is
        yielded (and so failed, if the caller asks for more), its supersets are queued too — one more
        option on another node, gainless ones included — so a combination whose check fails does not
        hide the dearer ones that contain it (a pod moved off a node the target uses anyway may be
        what lets another moved pod be admitted again)."""
        names = sorted(n for n, opts in found.items() if opts)
        nodes = [sorted(found[n], key=lambda o: o.cost) for n in names]
        gaining = [[o for o in opts if o.gain > 0] for opts in nodes]
        n = len(nodes)
        best = cost_to_go(gaining, short, self.max_moves)
        heap: list[Entry] = []
        seq = 0
        seen: set[ComboKey] = set()

        def push(cost: Cost, i: int, d: int, path: Path) -> None:
            nonlocal seq
            rest = best[i][d] if d else (0, 0)
            if rest is INF:
                return
            f = add_costs(cost, rest)
            if f[0] > self.max_moves:
                return
            seq += 1
            heapq.heappush(heap, (f, d, -i, seq, cost, i, path))

        push((0, 0), 0, short, ())
        while heap:
            _f, d, _mi, _s, cost, i, path = heapq.heappop(heap)
            if d == 0:
                key = combo_key(o for _j, o in path)
                if key in seen:
                    continue
                seen.add(key)
                yield cost, [o for _j, o in path]
                used = {j for j, _o in path}
                for j in range(n):
                    if j not in used:
                        for opt in nodes[j]:
                            push(add_costs(cost, opt.cost), i, 0, (*path, (j, opt)))
                continue
            if i == n:
                continue
            push(cost, i + 1, d, path)
            for opt in gaining[i]:
                push(add_costs(cost, opt.cost), i + 1, max(0, d - opt.gain), (*path, (i, opt)))

    # -- one combination ----------------------------------------------------------------------------
    def try_plan(self, pods: list[RunningPod], evict: int) -> list[tuple[RunningPod, str | None]] | None:
        """Where the pods taken off go again (at most `evict` of them evicted instead), or None."""
        work = self.cluster.copy()
        for pod in pods:
            take_off(work, pod)
        result = target_session(work, self.job, self.profile, self.held)
        reason = session_ok(result, self.job)
        if not reason:
            used = {p.node for p in result.pods if p.status == PodStatus.ADMITTED}
            if {p.node for p in pods} - used:
                reason = "a node freed is not used by the target"
        if reason:
            self.fail(reason)
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
            self.gave_up = True
        self.fail("the moved pods cannot all be admitted again")
        return None

    def check(self, combo: list[Option], evictions: bool) -> tuple[list[tuple[RunningPod, str | None]], Check] | None:
        """Carry a combination out (fewest evictions first) and verify the plan from scratch."""
        self.checks += 1
        if self.progress is not None:
            self.progress(min(self.checks, self.max_checks), self.max_checks)
        pods = [p for opt in combo for p in opt.pods]
        over = self.rules.over_budget(pods)
        if over is not None:
            self.fail(over)
            return None
        for evict in range(len(pods) + 1) if evictions else (0,):
            moves = self.try_plan(pods, evict)
            if moves is not None:
                check = carry_out(self.cluster, self.job, self.profile, self.held, moves, explain=True)
                if check.ok:
                    return moves, check
                self.fail(f"verification: {check.reason}")
                return None
        return None

    def seeds(self, short: int, until: float) -> Iterator[Option]:
        """A first option on the nodes most likely to give one cheaply (fewest movable CPUs first), found
        greedily: take the node's smallest pods off one by one until it gains, then put back every pod
        it gains without. Not the cheapest options, but a plan early when single moves gain nothing
        (big pods over several small ones); the search in cost order stays what proves a plan cheapest."""
        gained = 0
        for name in sorted(self.movable, key=lambda n: (sum(p.cpu_count for p in self.movable[n]), n)):
            if gained >= 2 * short or time.monotonic() > until:
                return
            pods = sorted(self.movable[name], key=lambda p: (p.cpu_count, p.uid))
            base = self.base.get(name)
            if base is None:
                base = self.base[name] = self.cap(name)
            if self.cap(name, tuple(pods)) <= base:
                continue
            chosen: list[RunningPod] = []
            for pod in pods:
                chosen.append(pod)
                if self.cap(name, tuple(chosen)) > base:
                    break
            for pod in list(chosen):
                trial = tuple(p for p in chosen if p is not pod)
                if trial and self.cap(name, trial) > base:
                    chosen = list(trial)
            option = self.evaluate(name, tuple(sorted(chosen, key=lambda p: (p.cpu_count, p.uid))))
            if option is not None and option.gain > 0:
                gained += option.gain
                yield option

    # -- the whole search -----------------------------------------------------------------------------
    def search(self, short: int, evictions: bool) -> tuple[Check | None, bool, Cost]:
        """(the cheapest verified plan found, whether it is proven the cheapest, a lower bound on the
        cost of any plan). Options are evaluated in increasing cost, in batches; after each batch the
        combinations of the options known are checked in increasing cost. Any plan costs at least the
        first combination not yet checked, or uses an option not yet evaluated and costs at least the
        next one: the smaller of the two is the bound, and a plan that costs no more is the cheapest.
        Option evaluation stops at EVALUATION_SHARE of the time, leaving the rest to checks."""
        now = time.monotonic()
        self.evaluation_deadline = now + EVALUATION_SHARE * max(0.0, self.deadline - now)
        self.failed = set()
        found = Found()
        for option in self.seeds(short, now + SEED_SHARE * max(0.0, self.deadline - now)):
            found.add(option)
        stream = self.candidates()
        pending = next(stream, None)
        best: tuple[Cost, Check] | None = None
        batch = 1
        while True:
            evaluated = 0
            while pending is not None and time.monotonic() < self.evaluation_deadline and (
                    found.gain < short or evaluated < batch):
                _cost, name, pods = pending
                found.add(self.evaluate(name, pods))
                evaluated += 1
                pending = next(stream, None)
            batch = min(batch * 2, 4096)
            frontier = pending[0] if pending is not None else None
            evaluating = pending is not None and time.monotonic() < self.evaluation_deadline
            best, stop = self.check_in_order(found, short, best, frontier if evaluating else None, evictions)
            bound = min([c for c in (stop, frontier) if c is not None], default=(self.max_moves + 1, 0))
            if best is not None and best[0] <= bound:
                return best[1], self.complete, best[0]
            if not evaluating or self.expired() or self.checks >= self.max_checks:
                return (best[1] if best else None), False, bound

    def check_in_order(self, found: Found, short: int, best: tuple[Cost, Check] | None, frontier: Cost | None,
                       evictions: bool) -> tuple[tuple[Cost, Check] | None, Cost | None]:
        """Check the combinations of the options found in increasing cost, up to the first that works
        (the new best), one that costs no less than `best`, or the bounds. While options are still being
        evaluated (`frontier`: the cost of the next one), a combination dearer than the frontier is
        checked only once per batch and only while no plan is known. Returns the best plan and the cost
        of the first combination not checked (None: all were)."""
        early = False
        for cost, combo in self.combinations(found.by_node, short) if found.gain >= short else ():
            if (best is not None and cost >= best[0]) or self.expired() or self.checks >= self.max_checks:
                return best, cost
            if frontier is not None and cost > frontier:
                if best is not None or early:
                    return best, cost
                early = True
            key = combo_key(combo)
            if key in self.failed:
                continue
            done = self.check(combo, evictions)
            if done is None:
                self.failed.add(key)
                continue
            return (cost, done[1]), cost
        return best, None


def never(cluster: Cluster, job: Job, profile: Profile, held: frozenset[str], need: int) -> str:
    """Why no plan of moves can ever make room ('' when one might): even with every node empty, a session places
    fewer of the target's pods than it needs. The first pod left out says why, in the scheduler's words (e.g.
    `0/40 nodes are unavailable: 30 task topology policy[single-numa-node] is different with node[best-effort],
    10 Insufficient nvidia.com/gpu.`) or the kubelet's."""
    empty = Cluster(Node(n.name, n.topology, n.kubelet, (), n.numatopology, n.labels)
                    for n in cluster.nodes.values())
    result = target_session(empty, replace(job, min_available=1), profile, held, explain=True)
    admitted = result.counts["admitted"]
    if admitted >= need:
        return ""
    first = next((p for p in result.pods if p.status != PodStatus.ADMITTED), None)
    why = "" if first is None else first.message or first.kubelet_reason or first.status
    if admitted == 0:
        return f"no node can ever take a pod of it, even empty ({why})"
    return f"even with every node empty only {admitted} of the {need} pods it needs fit ({why})"


@paused_gc()
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
    placed_now = target_session(cluster.copy(), s.probe, profile, held).counts["admitted"]
    short = s.need - placed_now
    movable = sum(len(pods) for pods in s.movable.values())
    impossible = never(cluster, job, profile, held, s.need) if short > 0 else ""
    check = None
    proven, bound = False, (1, 0)
    if short > 0 and not impossible:
        check, proven, bound = s.search(short, evictions=False)
        if check is None and rules.allow_evictions and proven is False and bound[0] > max_moves and s.complete:
            check, proven, bound = s.search(short, evictions=True)
    proven = proven and s.alike
    stats: RoomStats = {"engine_s": round(time.monotonic() - started, 3), "options_evaluated": s.evaluated,
             "sessions": s.sessions, "checks": s.checks, "target_pods_now": placed_now, "shortfall": max(short, 0),
             "movable": movable, "not_movable": dict(sorted(s.refused.items())),
             "failed_checks": dict(sorted(s.failures.items()))}
    # never more than the cluster could move: "at least 17 moves" with 2 movable pods helps nobody
    lower = min(s.lower_bound(bound[0]) if short > 0 else 1, max_moves + 1, movable)
    if check is None:
        if impossible:
            reason, lower = impossible, 0
        elif short <= 0:
            reason = ("the target's pods fit one node at a time but not together "
                      f"({now.reason}); no plan of moves was searched")
        elif s.alike and s.complete and bound[0] > min(max_moves, movable):
            if movable <= max_moves:  # every set of movable pods was tried
                reason, lower = (f"moving any of the {movable} movable pods does not make room"
                                 + _unmovable(s.refused)), 0
            else:
                reason, stats["bound"] = f"no plan of at most {max_moves} moves (max_moves) makes room", "max_moves"
        else:
            stats["bound"], reason = _bound(s, time_limit, max_checks, max_moves, bound[0])
        return RoomPlan(False, False, lower_bound=lower, reason=reason, stats=stats)
    moves = [m for m in check.moves if m.to_node is not None]
    evicted = [m for m in check.moves if m.to_node is None]
    return RoomPlan(False, True, moves, evicted, minimal=proven, lower_bound=lower, check=check, stats=stats)


def _unmovable(refused: Mapping[str, int]) -> str:
    return f" (not movable: {', '.join(f'{n} {why}' for why, n in sorted(refused.items()))})" if refused else ""


def _bound(s: _Search, time_limit: float, max_checks: int, max_moves: int, bound: int) -> tuple[str, str]:
    """(which bound stopped a search that found no plan, the reason naming it): `time` (time_limit), `checks`
    (max_checks), `rehoming` (a moved pod's re-admission search hit MAX_DESTINATION_TRIES), `node_pods` (a node
    had more than MAX_NODE_PODS movable pods: only subsets of its smallest were tried) or `max_moves`."""
    if s.expired():
        return "time", f"no plan within the time limit of {time_limit:g} s"
    if s.checks >= max_checks:
        return "checks", f"no plan within the limit of {max_checks} checked plans"
    if s.gave_up:
        return "rehoming", (f"no plan found: re-admitting the moved pods stopped after {MAX_DESTINATION_TRIES} "
                            "tries on some plans")
    if s.truncated:
        return "node_pods", (f"no plan found among the subsets tried: nodes with more than {MAX_NODE_PODS} movable "
                             "pods offered subsets of their smallest pods only")
    return "max_moves", f"no plan of at most {max_moves} moves (max_moves) makes room (cheapest left: {bound})"


__all__ = ["RoomPlan", "make_room", "never"]
