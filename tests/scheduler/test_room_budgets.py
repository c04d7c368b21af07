"""PodDisruptionBudgets in make room and the queue's advisor: a pod whose budget allows no disruption never moves,
and no plan (nor the proposal's moves together) disrupts more pods of a budget than it allows. On the fragmented
cluster a gang of two 16-CPU single-numa-node pods needs two small pods moved."""

from __future__ import annotations

from scheduler_core import Cluster
from scheduler_core.scheduler.defrag import advise
from scheduler_core.scheduler.room import make_room
from scheduler_core.scheduler.room_moves import Budget, Rules

from .room_clusters import fragmented, gang

SMALL = frozenset(f"batch/small-{i}-{numa}" for i in range(2) for numa in range(2))


def moved(plan) -> set[str]:
    return {m.pod.uid for m in plan.moves}


def test_a_budget_allowing_no_disruption_keeps_its_pods_in_place():
    cluster = Cluster(fragmented(2))
    closed = Budget("batch/node-0-pods", 0, frozenset({"batch/small-0-0", "batch/small-0-1"}))
    plan = make_room(cluster, gang(2), "aligned", Rules(budgets=(closed,)), time_limit=10)
    assert plan.found and len(plan.moves) == 2
    assert moved(plan) == {"batch/small-1-0", "batch/small-1-1"}
    assert plan.stats["not_movable"] == {"PodDisruptionBudget": 2}


def test_no_plan_disrupts_more_than_a_budget_allows():
    cluster = Cluster(fragmented(2))
    plan = make_room(cluster, gang(2), "aligned", Rules(budgets=(Budget("batch/all", 1, SMALL),)), time_limit=10)
    assert not plan.found  # two moves are needed and the budget lets one pod go
    two = make_room(cluster, gang(2), "aligned", Rules(budgets=(Budget("batch/all", 2, SMALL),)), time_limit=10)
    assert two.found and len(two.moves) == 2
    one_each = (Budget("batch/node-0", 1, frozenset({"batch/small-0-0", "batch/small-0-1"})),
                Budget("batch/node-1", 1, frozenset({"batch/small-1-0", "batch/small-1-1"})))
    plan = make_room(cluster, gang(2), "aligned", Rules(budgets=one_each), time_limit=10)
    assert plan.found and {uid[:13] for uid in moved(plan)} == {"batch/small-0", "batch/small-1"}


def test_the_proposal_keeps_within_a_budget_across_its_jobs():
    cluster = Cluster(fragmented(2))
    jobs = [gang(1, name="train-a"), gang(1, name="train-b")]
    free = advise(cluster, jobs, "aligned", time_limit=20)
    assert len(free.proposal) == 2 and len(free.moves) == 2
    # each job alone needs one move, which the budget allows; both together would disrupt two of its pods
    advice = advise(cluster, jobs, "aligned", Rules(budgets=(Budget("batch/all", 1, SMALL),)), time_limit=20)
    assert all(a.plan.found for a in advice.jobs)
    assert len(advice.proposal) == 1 and len(advice.moves) == 1
