"""The queue ranked: make room over every pending job, conflicts between plans, and a proposal that one session
verifies with the moves it lists (room_clusters: every NUMA node holds one small 2-CPU pod, so a 16-CPU
single-numa-node pod fits nowhere until one is moved)."""

from __future__ import annotations

import time
from dataclasses import replace

from scheduler_core import Cluster
from scheduler_core.scheduler.defrag import advise, job_key
from scheduler_core.scheduler.room_moves import put_on, running_pods, take_off
from scheduler_core.scheduler.session import run_session

from .room_clusters import fragmented, gang


def test_conflicting_plans_are_marked_and_the_proposal_places_both_jobs_with_the_moves_it_lists():
    cluster = Cluster(fragmented(2))
    jobs = [gang(1, name="train-a"), gang(1, name="train-b"), gang(1, cpus=40, name="too-big")]
    advice = advise(cluster, jobs, "aligned", time_limit=30)
    by_job = {a["job"]: a for a in advice.to_dict(cluster)["jobs"]}
    a, b, big = by_job["ml/train-a"], by_job["ml/train-b"], by_job["ml/too-big"]
    assert (a["moves"], a["moved_cpus"], a["minimal"]) == (1, 2, True)
    assert (b["moves"], b["moved_cpus"]) == (1, 2)
    # asked one at a time, both plans move the same small pod: they conflict
    assert a["conflicts"] == ["ml/train-b"] and b["conflicts"] == ["ml/train-a"]
    assert big["found"] is False and big["moves"] is None and big["reason"]
    assert [x["job"] for x in advice.to_dict(cluster)["jobs"]][-1] == "ml/too-big"  # no plan: ranked last

    proposal = advice.to_dict(cluster)["proposal"]
    assert proposal["jobs"] == ["ml/train-a", "ml/train-b"]
    assert len(proposal["moves"]) == 2 and proposal["moved_cpus"] == 4
    assert proposal["after"] == {"pods_placed": 2, "topology_affinity_errors": 0, "admission_errors": 0}
    assert len({m["pod"] for m in proposal["moves"]}) == 2  # two different small pods

    # checked here, from the cluster as it is: the listed pods off, one session for both jobs, the pods back on
    work = cluster.copy()
    running = {p.uid: p for p in running_pods(cluster)}
    moved = [(running[f"{m['namespace']}/{m['pod']}"], m["to_node"]) for m in proposal["moves"]]
    for pod, _dest in moved:
        take_off(work, pod)
    result = run_session(work, jobs[:2], profile="aligned")
    assert result.counts["admitted"] == 2 and result.counts["topology_affinity_errors"] == 0
    assert all(j["committed"] for j in result.jobs)
    for pod, dest in moved:
        assert put_on(work, pod, dest) is not None, f"{pod.uid} not admitted again on {dest}"
    assert cluster.nodes["node-00"].free_cpus == Cluster(fragmented(2)).nodes["node-00"].free_cpus  # unchanged


def test_jobs_that_fit_now_rank_first_and_cost_nothing():
    cluster = Cluster(fragmented(1))
    advice = advise(cluster, [gang(1, name="big"), gang(1, cpus=4, name="small")], "aligned", time_limit=20)
    ranked = advice.to_dict(cluster)["jobs"]
    assert [r["job"] for r in ranked] == ["ml/small", "ml/big"]
    assert ranked[0]["fits_now"] and ranked[0]["moves"] == 0
    assert advice.to_dict(cluster)["proposal"]["jobs"] == ["ml/small", "ml/big"]


def test_the_time_limit_stops_the_questions_and_says_so():
    cluster = Cluster(fragmented(2))
    jobs = [replace(gang(1, name=f"j{i}"), priority=i) for i in range(40)]  # not alike: 40 questions
    advice = advise(cluster, jobs, "aligned", time_limit=0.5)
    assert advice.stopped is not None and "time limit of 0.5 s" in advice.stopped
    assert len(advice.jobs) < 40
    assert {job_key(a.job) for a in advice.jobs} <= {job_key(j) for j in jobs}


def test_the_time_limit_bounds_the_proposal_too(monkeypatch):
    from scheduler_core.scheduler import defrag

    verify = defrag.verify

    def slow_verify(*args, **kwargs):  # each try a session over a large cluster: here, a slow one
        time.sleep(1.0)
        return verify(*args, **kwargs)

    monkeypatch.setattr(defrag, "verify", slow_verify)
    cluster = Cluster(fragmented(8))
    jobs = [gang(1, name=f"j{i}") for i in range(10)]
    started = time.monotonic()
    advice = advise(cluster, jobs, "aligned", time_limit=5, job_time_limit=0.25)
    # past the limit by one try at most (a question of at most 0.25 s and a verification), and some slack
    assert time.monotonic() - started < 5 + 0.25 + 1.0 + 1.0
    assert len(advice.jobs) == 10 and all(a.plan.found for a in advice.jobs)
    assert "time limit reached while proposing" in (advice.stopped or "") and len(advice.proposal) < 10


def test_jobs_alike_are_asked_about_once_and_their_plans_conflict(monkeypatch):
    from scheduler_core.scheduler import defrag

    calls: list[str] = []
    make_room = defrag.make_room

    def counted(cluster, job, *args, **kwargs):
        calls.append(job.name)
        return make_room(cluster, job, *args, **kwargs)

    monkeypatch.setattr(defrag, "make_room", counted)
    cluster = Cluster(fragmented(2))
    jobs = [gang(1, name="a"), gang(1, name="b"), gang(1, name="c"), gang(1, cpus=8, name="small")]
    advice = advise(cluster, jobs, "aligned", time_limit=30)
    assert calls[:2] == ["a", "small"]  # b and c take a's answer; the proposal then asks again for b and c
    by_job = {a["job"]: a for a in advice.to_dict(cluster)["jobs"]}
    assert by_job["ml/b"]["moves"] == by_job["ml/a"]["moves"] == 1
    assert sorted(by_job["ml/a"]["conflicts"]) == ["ml/b", "ml/c"]
    assert advice.to_dict(cluster)["proposal"]["jobs"] == ["ml/small", "ml/a", "ml/b", "ml/c"]


def test_jobs_the_proposal_had_no_time_to_ask_again_for_are_said(monkeypatch):
    from scheduler_core.scheduler import defrag

    make_room = defrag.make_room

    def slow(*args, **kwargs):  # a question's fixed cost, as at 5,000 nodes: a smaller share finds nothing
        time.sleep(1.0)
        return make_room(*args, **kwargs)

    monkeypatch.setattr(defrag, "make_room", slow)
    cluster = Cluster(fragmented(2))
    jobs = [gang(1, name=f"j{i}") for i in range(4)]  # alike: one question, then each needs a plan of its own
    advice = advise(cluster, jobs, "aligned", time_limit=3)
    assert all(a.plan.found for a in advice.jobs) and 1 <= len(advice.proposal) < 4
    assert "ranked jobs left out of the proposal without a plan asked on the state it leaves" in advice.stopped
