"""A scheduling session over a cluster: which node each pod goes to, and what the kubelet then does.

`run_session(cluster, jobs, profile="volcano", progress=None, weight=1, explain_names=10,
explain_groups=64) -> SessionResult`

Order and gang: jobs run by priority (higher first), then `submitted`, then name; inside a job tasks
in their order, replicas in index order. A job's placements are kept only if at least
`min_available` of its pods found a node; otherwise every allocation the job made (kubelet node
state, the profile's own view such as Volcano's in-session free CPUs, the scheduler's resource
tally) is rolled back exactly.

Node choice is deterministic: highest total score, then fewest NUMA nodes spanned by the predicted
placement, then the profile's tie-break (aligned with `distance_tie_break`: the lower mean NUMA
distance), then node name.

Every profile (`profiles.PROFILES`) sits behind the same resource-fit filter
(the default scheduler's NodeResourcesFit: cpu/memory/device requests against allocatable; memory is
checked only on nodes whose topology states it); the profile evaluates what passes, scores it, and
keeps its own state through the place / rollback / close hooks.

After a node is chosen the kubelet's admission (`kubelet/admission.admit_pod`, commit=True) runs there
(unless the profile's verdict already is that admission: `ProfileSession.admission`), so
every placement records *predicted* and *admitted*; a pod the scheduler placed but the kubelet
rejects is reported with the kubelet's reason (`TopologyAffinityError`, ...), never as a success. It
still counts as placed for the gang (the scheduler bound it) and keeps its scheduler tally, but holds
no CPUs, memory or devices on the node.

Mutation: `run_session` **mutates the given cluster** (nodes receive the admitted allocations), so
the caller can persist `cluster.nodes` afterwards. Use `cluster.copy()` first for what-if runs.

Speed (the classes and shape views are in `classes`): nodes with the same shape, settings and free
state form a class (interned int id); a pod is evaluated once per class, and verdicts are kept per
(class, pod shape), so only the node that just changed is re-evaluated on the next step. Each pod
shape keeps its passing classes bucketed by (outcome, NUMA count, own score, tie-break) and catches up with the
classes born and gone since its last pod, so choosing a node does not walk every class; its verdict
groups (the explanation rows) are kept the same way, from the classes' change log, so a pod copies
one row per verdict. The cyclic collector is paused while the session runs (gc_pause.py).

Explanations: see `explain` for the schema of `SessionResult.to_dict()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Sequence

from ..dra.model import DraState
from ..errors import RequestError, check_int
from ..kubelet.admission import commit_admission
from ..model.jobs import Job, Task
from ..model.pods import Pod
from .admissions import Admissions, KubeletReading, kubelet_reading
from .claims import Choice, SessionClaims
from .classes import NodeClasses, ShapeView, VerdictGroup
from .cluster import Cluster, Request, Snapshot
from .explain import (
    FILTERED,
    PASSED,
    SKIPPED,
    UNSCHEDULABLE,
    JobResult,
    NodeVerdict,
    PodRecord,
    PodStatus,
    Row,
    SessionResult,
    Timings,
    VerdictTable,
    unavailable_message,
)
from .gc_pause import paused_gc
from .profiles import Profile, ProfileSession, get_profile

#: what decides a pod's verdicts, its identity aside: (the kubelet's reading of it, task policy, labels,
#: annotations, priority) — the last three for the profiles that read them (koordinator)
PodSignature = tuple[KubeletReading, str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], int | None]


def _pod_signature(pod: Pod) -> PodSignature:
    return (kubelet_reading(pod), pod.topology_policy or "", pod.labels, pod.annotations, pod.priority)


def _job_order(jobs: Sequence[Job]) -> list[Job]:
    return sorted(jobs, key=lambda j: (-j.priority, j.submitted, j.name))


def _validate(cluster: Cluster, jobs: Sequence[Job]) -> None:
    if not isinstance(cluster, Cluster):
        raise RequestError(f"run_session needs a Cluster, not {type(cluster).__name__}")
    seen: set[tuple[str, str]] = set()
    for job in jobs:
        if not isinstance(job, Job):
            raise RequestError(f"jobs must be Job objects, not {type(job).__name__}")
        key = (job.namespace, job.name)
        if key in seen:
            raise RequestError(f"job {job.namespace}/{job.name} is submitted twice")
        seen.add(key)


class _Session:
    """Gang bookkeeping aside, everything one session does: node classes, the verdicts per pod shape,
    the resource-fit filter, node choice and the kubelet's admission on the chosen node. What a
    profile decides is asked of `self.profile`.

    A pod's cost does not grow with the number of live classes: its shape's view catches up with the
    classes born and gone since the shape's last pod (set differences), evaluates only the new ones,
    scores one verdict per (outcome, NUMA count) and picks the node from the best bucket."""

    def __init__(self, cluster: Cluster, profile: ProfileSession, explain_names: int,
                 claims: SessionClaims | None = None):
        self.cluster = cluster
        self.claims = claims
        self.choice: Choice | None = None  # the last scheduled pod's devices, for `place`
        self.profile = profile
        self.classes = NodeClasses(cluster, profile)
        self.views: dict[PodSignature, ShapeView] = {}
        self.table = VerdictTable()
        self.explain_names = explain_names
        self.evaluations = 0
        self.class_visits = 0
        self.t_eval = 0.0
        self.t_admit = 0.0
        self.request: Request | None = None  # the last scheduled pod's requests, for `place`
        self.reading: KubeletReading | None = None  # and how the kubelet reads it
        self.admissions = Admissions(cluster)

    # -- one pod on one node class ----------------------------------------------------------------
    def evaluate(self, name: str, pod: Pod, prepared: object, req: Request) -> NodeVerdict:
        self.evaluations += 1
        reason = self.cluster.fit(name, req)
        if reason is not None:
            return NodeVerdict(FILTERED, reason=reason, code="Unschedulable")
        return self.profile.evaluate(name, pod, prepared)

    def _catch_up(self, view: ShapeView, pod: Pod, prepared: object) -> None:
        """Bring the shape's buckets to the live classes: drop the classes gone, add the ones born
        (evaluating, in class order, those this shape has never seen)."""
        live = self.classes.members
        counted = view.counted
        changed = self.classes.changed
        touched = changed[view.seen_changes:]
        view.seen_changes = len(changed)
        if counted and len(touched) < len(live):
            # every class born or gone since the last catch-up is in the change log: read it, not every class
            logged = set(touched)
            gone = logged.intersection(counted).difference(live)
            born = {cid for cid in logged.difference(counted) if cid in live}
        else:
            gone = counted.difference(live)
            born = live.keys() - counted
        buckets, bucket_of, groups, verdicts = view.buckets, view.bucket_of, view.groups, view.verdicts
        for cid in gone:
            counted.discard(cid)
            sig = verdicts[cid].sig
            group = groups[sig]
            group.drop(cid)
            if not group.members:
                del groups[sig]
            key = bucket_of.get(cid)
            if key is not None:
                bucket = buckets[key]
                bucket.discard(cid)
                if not bucket:
                    del buckets[key]
        for cid in counted.intersection(touched):  # counted classes whose members changed
            groups[verdicts[cid].sig].put(cid, live[cid][1])
        if not born:
            return
        for cid in sorted(born, key=self.classes.born_at.__getitem__):  # in class order
            if cid not in verdicts:
                first = live[cid][1][0]
                verdict = verdicts[cid] = self.evaluate(first, pod, prepared, view.request)
                self.table.intern(verdict)
                if verdict.outcome in (PASSED, SKIPPED):
                    bucket_of[cid] = (verdict.outcome, verdict.numa_count, verdict.score or 0,
                                      self.profile.tie_break(first, verdict))
            counted.add(cid)
            sig = verdicts[cid].sig
            into = groups.get(sig)
            if into is None:
                into = groups[sig] = VerdictGroup(self.explain_names, self.classes.rank)
            into.put(cid, live[cid][1])
            key = bucket_of.get(cid)
            if key is not None:
                buckets.setdefault(key, set()).add(cid)

    def _rows(self, view: ShapeView, scores: dict[tuple[str, int], int] | None
              ) -> list[Row]:
        """The pod's explanation rows: per verdict, its score, node count and first names. A verdict
        fixes (outcome, NUMA count) and so the score: grouping by verdict is grouping by (verdict, score)."""
        rows = []
        items = self.table.items
        for sig, group in view.groups.items():
            score = None
            verdict = items[sig]
            if scores is not None and verdict.outcome in (PASSED, SKIPPED):
                score = scores[(verdict.outcome, verdict.numa_count)]
            if verdict.score is not None:
                score = (score or 0) + verdict.score
            rows.append(group.row(sig, score))
        return rows

    # -- one pod ----------------------------------------------------------------------------------
    def schedule(self, job: Job, task: Task, pod: Pod, prepared: object
                 ) -> tuple[PodRecord, str | None, NodeVerdict | None]:
        t0 = time.perf_counter()
        sig = _pod_signature(pod)
        view = self.views.get(sig)
        if view is None:
            view = self.views[sig] = ShapeView(Request.of(pod))
        self.request, self.reading = view.request, sig[0]
        live = self.classes.members
        self.class_visits += len(live)
        self._catch_up(view, pod, prepared)
        verdicts, buckets = view.verdicts, view.buckets
        pod_claims = self.claims.claims_of(pod) if self.claims is not None else ()
        self.choice = None
        claim_reason = None
        scores = None
        best = None
        if buckets:
            # the profile's score depends on a verdict's (outcome, NUMA count) and on the set of those
            # that pass; a verdict's own score (a profile scoring each node alone) is added to it
            pairs: dict[tuple[str, int], set[int]] = {}
            for (outcome, count, _own, _tie), cids in buckets.items():
                pairs.setdefault((outcome, count), cids)
            values = self.profile.scores(prepared, [verdicts[next(iter(c))] for c in pairs.values()])
            if values is not None:
                scores = dict(zip(pairs, values, strict=True))
            best_key = None
            chosen: list[set[int]] = []
            for (outcome, count, own, tie), cids in buckets.items():
                key = (-(scores[(outcome, count)] if scores is not None else 0) - own, count, tie)
                if best_key is None or key < best_key:
                    best_key, chosen = key, [cids]
                elif key == best_key:
                    chosen.append(cids)
            best = min(live[cid][1][0] for cids in chosen for cid in cids)
            if pod_claims:
                assert self.claims is not None
                got = self.claims.choose(pod, pod_claims, self._candidates(view, scores))
                if isinstance(got, str):
                    best, claim_reason = None, got
                else:
                    best, self.choice = got
        record = PodRecord(pod=pod.name, uid=pod.uid, namespace=pod.namespace, job=job.name, task=task.name,
                           policy=pod.topology_policy or "", qos=pod.qos_class, nodes_total=len(self.cluster))
        record.rows = self._rows(view, scores)
        self.t_eval += time.perf_counter() - t0
        if best is None:
            reasons: dict[str, int] = {}
            for cid, names in live.values():
                verdict = verdicts[cid]
                if verdict.outcome in (FILTERED, UNSCHEDULABLE):
                    reason = verdict.reason or "no reason given"  # a rejection always has one
                    reasons[reason] = reasons.get(reason, 0) + len(names)
            if claim_reason is not None:  # every node that passed, refused for the pod's claims
                reasons[claim_reason] = sum(len(live[cid][1]) for cids in buckets.values() for cid in cids)
            record.status = PodStatus.UNSCHEDULABLE
            record.message = unavailable_message(reasons)
            return record, None, None
        verdict = verdicts[self.classes.of[best]]
        record.node = best
        record.score = None if scores is None else scores[(verdict.outcome, verdict.numa_count)]
        if verdict.score is not None:
            record.score = (record.score or 0) + verdict.score
        record.predicted = verdict
        return record, best, verdict

    def _candidates(self, view: ShapeView, scores: dict[tuple[str, int], int] | None) -> Iterator[tuple[str, int]]:
        """The passing nodes in the order the session prefers them (score, NUMA count, tie-break, then name),
        each with its predicted NUMA mask: where a pod with claims is tried until its claims fit."""
        live, verdicts = self.classes.members, view.verdicts
        ranked: dict[tuple[int, int, float], list[int]] = {}
        for (outcome, count, own, tie), cids in view.buckets.items():
            key = (-(scores[(outcome, count)] if scores is not None else 0) - own, count, tie)
            ranked.setdefault(key, []).extend(cids)
        served = self.claims.allocator.served if self.claims is not None else None
        for key in sorted(ranked):
            yield from sorted((name, verdicts[cid].numa_mask) for cid in ranked[key]
                              for name in (live[cid][1] if served is None else served.intersection(live[cid][1])))

    # -- commit one placement ----------------------------------------------------------------------
    def place(self, record: PodRecord, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        """Bind the pod just scheduled to `name` and run the kubelet's admission there."""
        c = self.cluster
        req = self.request
        if req is None:
            raise RuntimeError("_Session.place: no pod was scheduled")
        c.add_request(name, req)
        self.profile.on_place(pod, prepared, name, verdict)
        t0 = time.perf_counter()
        node = c.nodes[name]
        res = self.profile.admission(name, pod, verdict)
        if res is None:
            res = self.admissions.admit(name, pod, self.reading)
        commit_admission(node, res)
        self.t_admit += time.perf_counter() - t0
        record.admission = res
        if res.admitted:
            record.status = PodStatus.ADMITTED
            record.admitted_numa = node.numa_mask_of(res.allocations)
            record.allocations = list(res.allocations)
            if self.choice is not None and self.claims is not None:
                record.dra = self.claims.commit(pod, node, self.choice, res.allocations)
        else:
            record.status = PodStatus.REJECTED
            record.kubelet_reason = res.reason
            record.message = res.error.message if res.error is not None else None
        c.refresh(name)
        self.classes.update(name)


    # -- one job ----------------------------------------------------------------------------------------
    def run_job(self, job: Job, pods: Sequence[tuple[Task, Pod]], already: int, tick: Callable[[], None]
                ) -> tuple[list[PodRecord], JobResult]:
        """Schedule and place the job's pods in order (`already` of its pods hold their resources); below
        its minAvailable, every placement it made is rolled back exactly. `tick` is called per pod."""
        cluster, hooks = self.cluster, self.profile
        saved: dict[str, Snapshot] = {}
        placed: list[tuple[PodRecord, Pod, str]] = []
        records = []
        minimum = gang_minimum(job)
        undoable = already + 1 < minimum  # else the job commits as soon as one pod is placed: no snapshots
        for task, pod in pods:
            prepared = hooks.prepare(pod)
            record, name, verdict = self.schedule(job, task, pod, prepared)
            if name is not None and verdict is not None:
                if undoable and name not in saved:
                    saved[name] = cluster.snapshot(name)
                self.place(record, pod, prepared, name, verdict)
                placed.append((record, pod, name))
            records.append(record)
            tick()
        committed = len(placed) + already >= minimum
        if not committed:
            for record, pod, name in placed:
                hooks.on_rollback(pod, name)
                if self.claims is not None:
                    self.claims.release(pod)
                record.status = PodStatus.ROLLED_BACK
                record.message = (f"job {job.name}: only {len(placed) + already} of the {minimum} pods "
                                  f"minAvailable requires could be placed; placement rolled back")
            for name, snap in saved.items():
                cluster.restore(name, snap)
                self.classes.update(name)
        return records, {"job": job.name, "namespace": job.namespace, "priority": job.priority,
                         "min_available": minimum, "pods": len(pods), "placed": len(placed), "held": already,
                         "committed": committed}

    def timings(self, elapsed: float, pods: int) -> Timings:
        nodes = len(self.cluster)
        return {"total_s": elapsed, "evaluate_s": self.t_eval, "admission_s": self.t_admit,
                "pods_per_s": (pods / elapsed) if elapsed > 0 else None,
                "evaluations": self.evaluations, "class_visits": self.class_visits,
                "us_per_pod_node": (elapsed * 1e6 / (pods * nodes)) if pods and nodes else None}


def gang_minimum(job: Job) -> int:
    """The job's minAvailable (never None once a Job is built: its default, every replica, is filled in then)."""
    return len(job.pods()) if job.min_available is None else job.min_available


def _pending(jobs: Sequence[Job], held: frozenset[str]) -> list[tuple[Job, list[tuple[Task, Pod]], int]]:
    """Per job, in order: the pods to schedule (those not `held`) and how many are held already."""
    work = []
    for job in jobs:
        pods = job.pods()
        todo = [(task, pod) for task, pod in pods if pod.uid not in held] if held else pods
        work.append((job, todo, len(pods) - len(todo)))
    return work


@paused_gc()
def run_session(cluster: Cluster, jobs: Sequence[Job], profile: str | Profile = "volcano",
                progress: Callable[[int, int], None] | None = None, weight: int = 1,
                explain_names: int = 10, explain_groups: int = 64,
                held: Collection[str] = (), dra: DraState | None = None) -> SessionResult:
    """Schedule `jobs` onto `cluster` with `profile` (see the module docstring); mutates `cluster`.

    `profile` is a name of `PROFILES` or a `Profile` object (which then carries its own weight).
    `progress(done, total)` is called as pods are decided (at most ~200 times, and once at the end).
    `weight` is the numa-aware plugin weight; `explain_names` caps the node names listed per group of
    identical nodes and `explain_groups` the groups kept per pod (the rest are summarised).
    `held` names pods (uids, `namespace/name`) that already hold their resources: they are not
    scheduled again and count toward their job's `min_available`, as running tasks do in Volcano's gang.
    `dra` (the cluster's DRA objects) makes the pods with claims allocate them on their node (`claims`).
    """
    jobs = list(jobs)
    chosen = get_profile(profile, weight)
    _validate(cluster, jobs)
    for what, value in (("explain_names", explain_names), ("explain_groups", explain_groups)):
        check_int(value, what)
    start = time.perf_counter()
    hooks = chosen.open(cluster)
    claims = SessionClaims(dra, chosen.name == "aligned") if dra is not None and not dra.is_empty() else None
    s = _Session(cluster, hooks, explain_names, claims)
    work = _pending(_job_order(jobs), frozenset(held))
    total = sum(len(p) for _j, p, _h in work)
    step = max(1, total // 200)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None and (done % step == 0 or done == total):
            progress(done, total)

    records: list[PodRecord] = []
    job_results: list[JobResult] = []
    for job, pods, already in work:
        job_records, job_result = s.run_job(job, pods, already, tick)
        records.extend(job_records)
        job_results.append(job_result)
    if progress is not None and total == 0:
        progress(0, 0)
    timings = s.timings(time.perf_counter() - start, total)
    return SessionResult(profile=chosen.name, weight=chosen.weight, nodes_total=len(cluster), pods=records,
                         jobs=job_results, table=s.table, timings=timings, volcano_close=hooks.close(),
                         explain_names=explain_names, explain_groups=explain_groups)
