"""The session's incremental node choice (per-shape views of the node classes, buckets, verdict groups)
decides exactly what a straightforward evaluation decides: every pod judged on every node, scored
over every passing node, the best by (score, NUMA count, tie-break, name), the explanation grouped
node by node. Random clusters and workloads (gangs that roll back included), every profile."""

import json
import random

import pytest

from scheduler_core.bench import make_cluster, make_jobs
from scheduler_core.model.jobs import Job, Task
from scheduler_core.model.pods import Container, Pod
from scheduler_core.scheduler import session as S
from scheduler_core.scheduler.admissions import kubelet_reading
from scheduler_core.scheduler.cluster import Request
from scheduler_core.scheduler.explain import PASSED, SKIPPED, PodRecord, VerdictTable, unavailable_message
from scheduler_core.scheduler.profiles import AlignedProfile, UnawareProfile, VolcanoProfile


def straightforward_schedule(self, job, task, pod, prepared):
    """`_Session.schedule` without classes or caches: every node, every time."""
    req = Request.of(pod)
    self.request, self.reading = req, kubelet_reading(pod)
    names = sorted(self.cluster.nodes)
    verdicts = {n: self.evaluate(n, pod, prepared, req) for n in names}
    for verdict in verdicts.values():
        self.table.intern(verdict)
    passing = [n for n in names if verdicts[n].outcome in (PASSED, SKIPPED)]
    values = self.profile.scores(prepared, [verdicts[n] for n in passing]) if passing else None
    scores = {} if values is None else dict(zip(passing, values, strict=True))
    best = min(passing, default=None, key=lambda n: (-scores.get(n, 0), verdicts[n].numa_count,
                                                      self.profile.tie_break(n, verdicts[n]), n))
    record = PodRecord(pod=pod.name, uid=pod.uid, namespace=pod.namespace, job=job.name, task=task.name,
                       policy=pod.topology_policy or "", qos=pod.qos_class, nodes_total=len(self.cluster))
    groups: dict[tuple, list] = {}
    for n in names:
        key = (verdicts[n].sig, scores.get(n) if values is not None else None)
        groups.setdefault(key, []).append(n)
    rows = [(sig, score, len(members), members[:self.explain_names]) for (sig, score), members in groups.items()]
    record.rows = rows
    if best is None:
        reasons: dict[str, int] = {}
        for n in names:
            if verdicts[n].outcome not in (PASSED, SKIPPED):
                reasons[verdicts[n].reason] = reasons.get(verdicts[n].reason, 0) + 1
        record.status = "unschedulable"
        record.message = unavailable_message(reasons)
        return record, None, None
    record.node = best
    record.score = scores.get(best) if values is not None else None
    record.predicted = verdicts[best]
    return record, best, verdicts[best]


def _gangs(rng: random.Random, count: int) -> list[Job]:
    """Gangs too big for what is left, so some roll back."""
    out = []
    for i in range(count):
        cpus = rng.choice((8, 16, 24))
        pod = Pod("t", (Container.guaranteed("app", cpus * 1000, 1 << 30),))
        replicas = rng.randint(4, 12)
        out.append(Job(f"gang-{i}", (Task("w", pod, replicas, rng.choice(("single-numa-node", None))),),
                       min_available=replicas, submitted=10_000 + i))
    return out


def _outcome(result):
    table: VerdictTable = result.table

    def shown(verdict):
        data = verdict.to_dict()
        if data["admission"] is not None:
            # a verdict is kept per (class, pod shape): it shows the first node and pod it was made for
            data["admission"].pop("node")
            data["admission"].pop("pod")
            for allocation in data["admission"]["allocations"]:
                allocation.pop("pod")
        return json.dumps(data, sort_keys=True)

    pods = []
    for p in result.pods:
        rows = sorted((shown(table.items[sig]), score, count, tuple(names)) for sig, score, count, names in p.rows)
        predicted = None if p.predicted is None else shown(p.predicted)
        pods.append((p.pod, p.status, p.node, p.score, p.message, predicted, rows))
    return pods, result.jobs, result.counts


PROFILES = [VolcanoProfile(), VolcanoProfile(weight=0), VolcanoProfile(weight=-3), AlignedProfile(),
            AlignedProfile(distance_tie_break=True), UnawareProfile()]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.name}-{p}")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_session_decides_like_a_straightforward_one(profile, seed, monkeypatch):
    rng = random.Random(seed)
    nodes = rng.randint(6, 16)
    jobs = make_jobs(rng.randint(40, 80), seed=seed) + _gangs(rng, 6)
    fast = S.run_session(make_cluster(nodes, seed=seed), jobs, profile=profile, explain_names=rng.choice((0, 2, 10)))
    monkeypatch.setattr(S._Session, "schedule", straightforward_schedule)
    slow = S.run_session(make_cluster(nodes, seed=seed), jobs, profile=profile, explain_names=fast.explain_names)
    assert fast.placements() == slow.placements()
    assert _outcome(fast) == _outcome(slow)
    assert any(not j["committed"] for j in fast.jobs)  # the workload exercises rollbacks
    assert any(p.status == "unschedulable" for p in fast.pods)  # and pods that fit nowhere


def test_scaling_benchmark_compares_two_cluster_sizes(monkeypatch):
    from scheduler_core import bench

    monkeypatch.setattr(bench, "SCALING", ((8, 16), (24, 48)))
    (row,) = bench.scaling(["volcano"])
    assert (row["small"]["nodes"], row["large"]["pods"]) == (8, 48)
    assert row["ratio_cpu"] == row["large"]["pods_per_cpu_s"] / row["small"]["pods_per_cpu_s"] > 0
