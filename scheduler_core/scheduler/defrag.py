"""The pending queue, ranked by what it takes to place each job (docs/MAKE_ROOM.md, "The queue").

`advise(cluster, jobs, profile, rules, ...)` asks make room (`room.make_room`) for every pending job on the cluster
as it is (once for jobs alike: same pods, gang, priority, namespace and queue, none running), within half of one time
budget, and ranks the answers: jobs that fit now first, then by the fewest pods
moved, then CPUs moved. Two plans *conflict* when they move a pod in common. The *proposal* is a compatible set chosen
greedily in that order: a job joins with its own plan, or, when that one conflicts with the set so far or does not
verify with it, with a plan make room finds on the state the set leaves (the set's pods pinned). It joins only if
all the moves, carried out together on a copy of the cluster as it is, let one dry-run session place every job of
the set (each gang committed, no pod refused by a kubelet) and every moved pod is then admitted again — on the node
its plan named, else on the first other node by name whose kubelet admits it. So the proposal is verified as make
room's plans are, as one plan: one session placing its jobs after its moves."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

from ..errors import RequestError
from ..model.jobs import Job
from .cluster import Cluster
from .explain import SessionResult
from .gc_pause import paused_gc
from .profiles import Profile, get_profile
from .room import make_room
from .room_moves import AfterDict, Move, MoveDict, RoomPlan, Rules, RunningPod, put_on, running_pods, take_off
from .session import _pod_signature, run_session

#: the least time one job's make room gets, whatever the budget left (a smaller share proves nothing)
MIN_JOB_SECONDS = 0.2


def job_key(job: Job) -> str:
    return f"{job.namespace}/{job.name}"


@dataclass
class JobAdvice:
    """One job's make-room answer and the jobs whose plans move a pod this one's plan moves."""

    job: Job
    plan: RoomPlan
    conflicts: tuple[str, ...] = ()

    @property
    def moved(self) -> frozenset[str]:
        return frozenset(m.pod.uid for m in (*self.plan.moves, *self.plan.evictions))

    @property
    def rank(self) -> tuple[int, int, int]:
        if not self.plan.found:
            return (1, 0, 0)
        return (0, len(self.plan.moves) + len(self.plan.evictions), self.plan.moved_cpus)


class JobAdviceDict(TypedDict):
    job: str
    fits_now: bool
    found: bool
    moves: int | None
    moved_cpus: int | None
    minimal: bool
    lower_bound: int
    reason: str
    conflicts: list[str]


class ProposalDict(TypedDict):
    jobs: list[str]
    moves: list[MoveDict]
    moved_cpus: int
    after: AfterDict | None


class AdviceDict(TypedDict):
    jobs: list[JobAdviceDict]
    proposal: ProposalDict
    stopped: str | None
    engine_s: float


@dataclass
class Advice:
    """`jobs` ranked; the proposal's jobs, its moves (in the order they are carried out, with where each pod was
    admitted again) and the session that placed them; `stopped`: the bound that cut the questions short."""

    jobs: list[JobAdvice]
    proposal: list[Job] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    result: SessionResult | None = None
    stopped: str | None = None
    engine_s: float = 0.0

    def to_dict(self, cluster: Cluster) -> AdviceDict:
        counts = self.result.counts if self.result is not None else None
        return {
            "jobs": [{"job": job_key(a.job), "fits_now": a.plan.fits_now, "found": a.plan.found,
                      "moves": len(a.plan.moves) + len(a.plan.evictions) if a.plan.found else None,
                      "moved_cpus": a.plan.moved_cpus if a.plan.found else None, "minimal": a.plan.minimal,
                      "lower_bound": a.plan.lower_bound, "reason": a.plan.reason, "conflicts": list(a.conflicts)}
                     for a in self.jobs],
            "proposal": {"jobs": [job_key(j) for j in self.proposal], "moves": [m.to_dict(cluster) for m in self.moves],
                         "moved_cpus": sum(m.pod.cpu_count for m in self.moves if m.to_node is not None),
                         "after": None if counts is None else {
                             "pods_placed": counts["placed"],
                             "topology_affinity_errors": counts["topology_affinity_errors"],
                             "admission_errors": counts["admission_errors"]}},
            "stopped": self.stopped, "engine_s": round(self.engine_s, 3),
        }


@dataclass
class _Verified:
    moves: list[Move]
    result: SessionResult
    cluster: Cluster  # the state the plan leaves: its jobs placed, every moved pod admitted again


def verify(cluster: Cluster, jobs: Sequence[Job], moves: Sequence[tuple[RunningPod, str | None]],
           profile: str | Profile, held: Collection[str] = ()) -> _Verified | str:
    """`moves` (a pod as it runs on `cluster`, and its destination; None: evicted) carried out together on a copy of
    `cluster` (left unchanged), then one dry-run session for `jobs`, then every moved pod admitted again (its
    destination first, then the other nodes by name); the moves as carried out and the session, or why it fails."""
    work = cluster.copy()
    for pod, _dest in moves:
        take_off(work, pod)
    result = run_session(work, list(jobs), profile=profile, held=held, explain_names=0, explain_groups=0)
    counts = result.counts
    refused = counts["topology_affinity_errors"] + counts["admission_errors"]
    if refused:
        return f"{refused} pods refused by a kubelet"
    uncommitted = [j["job"] for j in result.jobs if not j["committed"]]
    if uncommitted:
        return f"job {uncommitted[0]} not placed"
    done = []
    for pod, dest in moves:
        if dest is None:
            done.append(Move(pod, None))
            continue
        move = next((m for node in (dest, *sorted(set(work.nodes) - {dest}))
                     if (m := put_on(work, pod, node)) is not None), None)
        if move is None:
            return f"{pod.uid} cannot be admitted again anywhere"
        done.append(move)
    return _Verified(done, result, work)


def _question(job: Job, held: Collection[str]) -> Hashable | None:
    """What make room's answer for a job depends on, its identity aside (its pods as a session sees them, its gang
    minimum, priority, namespace and queue): jobs alike share one answer, asked once. None when some of its pods run
    (the answer then depends on which)."""
    if held:
        return None
    return (tuple(_pod_signature(pod) for _t, pod in job.pods()), job.min_available, job.priority, job.namespace,
            job.queue)


def _moves(plan: RoomPlan) -> list[tuple[RunningPod, str | None]]:
    return [(m.pod, m.to_node) for m in (*plan.moves, *plan.evictions)]


@paused_gc()
def advise(cluster: Cluster, jobs: Sequence[Job], profile: str | Profile = "aligned", rules: Rules | None = None,
           priorities: Mapping[str, int] | None = None, held: Mapping[str, Collection[str]] | None = None,
           max_moves: int = 8, time_limit: float = 60.0, job_time_limit: float = 8.0, max_checks: int = 200,
           progress: Callable[[int, int], None] | None = None) -> Advice:
    """Make room for each of `jobs` on `cluster` (left unchanged), ranked, with conflicts and a verified proposal
    (module docstring). `held`: job key → uids of that job's pods already running; `time_limit` bounds the whole
    question (each job's make room gets at most `job_time_limit`, and an equal share of what is left, and checks at
    most `max_checks` plans)."""
    started = time.monotonic()
    deadline = started + time_limit
    if time_limit <= 0 or job_time_limit <= 0:
        raise RequestError("time_limit: must be above zero", "time_limit")
    profile = get_profile(profile)
    rules = rules or Rules()
    held = held or {}
    answers: list[JobAdvice] = []
    stopped = None
    keys = [_question(job, held.get(job_key(job), ())) for job in jobs]
    asked: dict[Hashable, RoomPlan] = {}
    took: list[float] = []
    for i, job in enumerate(jobs):
        plan = asked.get(keys[i]) if keys[i] is not None else None
        if plan is None:
            questions = len({k for k in keys[i:] if k is not None and k not in asked}) + keys[i:].count(None)
            share = min(job_time_limit, (deadline - time.monotonic()) / (2 * questions))  # half for the proposal
            if share < MIN_JOB_SECONDS:
                stopped = f"time limit of {time_limit:g} s reached after {i} of {len(jobs)} jobs"
                break
            asking = time.monotonic()
            plan = make_room(cluster, job, profile, rules, priorities, held.get(job_key(job), ()), max_moves, share,
                             max_checks)
            took.append(time.monotonic() - asking)
            if keys[i] is not None:
                asked[keys[i]] = plan
        answers.append(JobAdvice(job, plan))
        if progress is not None:
            progress(i + 1, len(jobs))
    ranked = _with_conflicts(sorted(answers, key=lambda a: a.rank))
    advice = Advice(ranked, stopped=stopped)
    _propose(advice, cluster, profile, rules, priorities, held, max_moves, job_time_limit, max_checks, deadline,
             min(took, default=0.0))
    advice.engine_s = time.monotonic() - started
    return advice


def _propose(advice: Advice, cluster: Cluster, profile: Profile, rules: Rules, priorities: Mapping[str, int] | None,
             held: Mapping[str, Collection[str]], max_moves: int, job_time_limit: float, max_checks: int,
             deadline: float, floor: float) -> None:
    """The greedy proposal: each job in rank order joins if its own plan, or failing that a plan asked on the state
    the set so far leaves (its pods pinned), verifies together with the set's moves from `cluster` as it is. `floor`:
    the shortest time a question took (what asking costs on this cluster before any search: a smaller share finds
    nothing)."""
    running = {p.uid: p for p in running_pods(cluster, priorities)}
    chosen: list[Job] = []
    moves: dict[str, tuple[RunningPod, str | None]] = {}  # by uid, in order: the pod as it runs now, its destination
    state: _Verified | None = None
    unasked = 0  # jobs whose plan on the state the set leaves there was no time left to ask for
    for i, candidate in enumerate(advice.jobs):
        if not candidate.plan.found:
            break  # ranked: the rest have no plan either
        if time.monotonic() > deadline:  # each try is a session over the whole cluster: the budget bounds them too
            reached = f"time limit reached while proposing, after {i} of {len(advice.jobs)} ranked jobs"
            advice.stopped = f"{advice.stopped}; {reached}" if advice.stopped else reached
            break

        def plans(candidate: JobAdvice = candidate, i: int = i, state: _Verified | None = state,
                  taken: frozenset[str] = frozenset(moves)) -> Iterator[RoomPlan]:
            """Its own plan, unless it moves a pod the set moves already (it cannot make room twice); then, asked
            only if needed, a plan on the state the set leaves, with at least the time one question took."""
            nonlocal unasked
            if not candidate.moved & taken:
                yield candidate.plan
            left = deadline - time.monotonic()
            share = min(job_time_limit, max(left / (len(advice.jobs) - i), floor))
            if state is not None and (share < MIN_JOB_SECONDS or left < share):
                unasked += 1
            elif state is not None:
                placed = tuple(p.uid for p in state.result.pods if p.node is not None)
                again = replace(rules, pinned=(*rules.pinned, *placed))
                yield make_room(state.cluster, candidate.job, profile, again, priorities,
                                held.get(job_key(candidate.job), ()), max_moves, share, max_checks)

        for plan in plans():
            if not plan.found:
                continue
            merged = dict(moves)
            for pod, dest in _moves(plan):
                if pod.uid not in running:
                    break  # a pod the set placed: not to be moved
                merged[pod.uid] = (merged.get(pod.uid, (running[pod.uid], None))[0], dest)
            else:
                if rules.over_budget(pod for pod, _dest in merged.values()) is not None:
                    continue  # the set's moves together disrupt more than a PodDisruptionBudget allows
                together = [*chosen, candidate.job]
                all_held = frozenset(uid for j in together for uid in held.get(job_key(j), ()))
                outcome = verify(cluster, together, list(merged.values()), profile, all_held)
                if isinstance(outcome, _Verified):
                    chosen, moves, state = together, merged, outcome
                    advice.proposal, advice.moves, advice.result = chosen, outcome.moves, outcome.result
                    break
    if unasked:
        reached = (f"time limit: {unasked} ranked jobs left out of the proposal without a plan asked on the state it "
                   f"leaves (one needs about {floor:.1f} s)")
        advice.stopped = f"{advice.stopped}; {reached}" if advice.stopped else reached


def _with_conflicts(answers: list[JobAdvice]) -> list[JobAdvice]:
    for a in answers:
        a.conflicts = tuple(job_key(b.job) for b in answers if b is not a and a.moved & b.moved)
    return answers


__all__ = ["Advice", "JobAdvice", "advise", "verify"]
