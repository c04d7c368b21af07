"""Issue 37 row 4: pod search is answered from indexes (allocations paged by the database, a job's pods from
its tasks' name prefixes and replica counts), at a cost that does not grow with the replicas (2.4 M pods: one
search took 22.4 s and 2.1 GB). Its answers are those of building every pod and sorting them: a brute-force
reference over tricky names (two jobs whose tasks name the same pods, one name in two clusters, held job pods,
upper case, digits) is compared on many queries and limits."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs.models import Job, Task
from numaweb.scheduling import pod_search
from numaweb.scheduling.pod_search import _Indexes, find_pods
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db


def _job(cluster: Cluster, namespace: str, name: str, **tasks: int) -> Job:
    job = Job.objects.create(cluster=cluster, namespace=namespace, name=name)
    Task.objects.bulk_create([Task(job=job, name=task.replace("_", "-"), replicas=n, template={})
                              for task, n in tasks.items()])
    return job


@pytest.fixture
def pods() -> tuple[Cluster, Cluster]:
    one, two = Cluster.objects.create(name="one"), Cluster.objects.create(name="two")
    _job(one, "a", "j-w", **{"1": 25})  # a/j-w-1-<i>, as the next job's task w-1 ...
    _job(one, "a", "j", w_1=13, ps=2)  # ... whose first 13 pods are this job's (the later one)
    _job(one, "b", "train", worker=120)
    _job(two, "b", "train", worker=11)  # the same names in another cluster
    _job(two, "c", "x12", r=101)
    n1, n2, m1 = make_node(one, "n1"), make_node(one, "n0"), make_node(two, "m1")
    for node, pod, container, cpus in (
            (n1, "a/j-w-1-3", "c", "0"), (n2, "b/train-worker-17", "c", "1"), (n1, "b/train-worker-17", "d", "2"),
            (n1, "A/J-W-1-0", "c", "3"), (n2, "ops/agent-12", "c", "4"), (m1, "b/train-worker-3", "c", "0"),
            (m1, "c/x12-r-100", "c", "1"), (n1, "b/train-worker-999", "c", "5")):
        Allocation.objects.create(node=node, pod=pod, container=container, cpus=cpus)  # rows as old data may hold
    return one, two


def _reference(query: str, cluster: int | None) -> list[tuple[str, str, object]]:
    """Every pod built and sorted: (pod, node name or "", job name and task of a job's pod)."""
    needle = query.strip().lower()
    held = Allocation.objects.select_related("node").order_by("pod", "node_id", "id")
    tasks = Task.objects.select_related("job").order_by("job_id", "id")
    if cluster is not None:
        held, tasks = held.filter(cluster_id=cluster), tasks.filter(job__cluster_id=cluster)
    of_jobs: dict[str, tuple[str, str]] = {}
    for t in tasks:
        for i in range(t.replicas):
            uid = f"{t.job.namespace}/{t.job.name}-{t.name}-{i}"
            if needle in uid.lower():
                of_jobs[uid] = (t.job.name, t.name)
    rows = {(a.pod, a.node.name): of_jobs.get(a.pod) for a in held if needle in a.pod.lower()}
    holding = {pod for pod, _node in rows}
    rows.update({(uid, ""): job for uid, job in of_jobs.items() if uid not in holding})
    return sorted((pod, node, job) for (pod, node), job in rows.items())


QUERIES = ["", "w", "W-1", "j-w-1-1", "-1", "1", "10", "12", "0", "9", "00", "worker-1", "train-worker-9", "x12", "x1",
           "2-r-1", "a/", "/", "-", "b/train", "nothing", "j-w-1-", "agent-1", "-r-10", "r-100", "1-1"]


@pytest.mark.parametrize("where", [None, "one", "two"])
def test_answers_are_every_pod_built_and_sorted(pods, where):
    cluster = None if where is None else Cluster.objects.get(name=where).pk
    for query in QUERIES:
        expected = _reference(query, cluster)
        for limit in (1, 7, 500):
            count, shown = find_pods(query, cluster, limit)
            got = [(m.uid, m.node[1] if m.node else "", (m.job[1], m.task) if m.job and m.task else None)
                   for m in shown]
            assert count == len(expected), (query, where)
            assert got == expected[:limit], (query, where, limit)


def test_indexes_count_and_list_in_text_order():
    for n in (0, 1, 9, 10, 11, 100, 101, 999, 1000, 1234, 10000):
        for digits in ("", "0", "1", "00", "01", "10", "11", "121", "99", "1212"):
            for anchored in (False, True):
                ref = sorted((i for i in range(n) if (str(i).startswith(digits) if anchored else digits in str(i))),
                             key=str)
                indexes = _Indexes(n, digits, anchored)
                assert indexes.count() == len(ref) and list(indexes.ordered()) == ref, (n, digits, anchored)


def test_cost_does_not_grow_with_replicas(monkeypatch):
    """The issue's shape, 230 jobs of 10,000 pods (2.3 M pods): a search builds only the pods it shows, in a
    fraction of the 22.4 s and 2.1 GB it took."""
    cluster = Cluster.objects.create(name="big")
    jobs = Job.objects.bulk_create([Job(cluster=cluster, namespace="big", name=f"load-{j}") for j in range(230)])
    Task.objects.bulk_create([Task(job=job, name="worker", replicas=10_000, template={}) for job in jobs])
    built, real = [], pod_search.PodMatch

    def counted(*args, **kwargs):
        built.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(pod_search, "PodMatch", counted)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        count, shown = find_pods("load", cluster.pk, 50)
        nines, shown_nines = find_pods("9", None, 500)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - started < 10 and peak < 50 << 20
    assert count == 2_300_000
    assert [m.uid for m in shown[:3]] == ["big/load-0-worker-0", "big/load-0-worker-1", "big/load-0-worker-10"]
    with_nine = sum(1 for i in range(10_000) if "9" in str(i))
    assert nines == sum(10_000 if "9" in str(j) else with_nine for j in range(230))
    assert [m.uid for m in shown_nines[:3]] == [f"big/load-0-worker-{i}" for i in
                                                 sorted(str(i) for i in range(10_000) if "9" in str(i))[:3]]
    assert len(built) == 50 + 500



@pytest.fixture
def many(pods) -> tuple[Cluster, Cluster]:
    """`pods` and 60 more jobs, created out of name order, whose prefixes interleave with each other's pods
    ("m-1" and "m-1-x" ...), a task of no replicas, and held pods of some of them."""
    one, two = pods
    node = make_node(two, "m2")
    for k in (37, 5, 59, 0, 12, 44, *range(1, 60, 3), *range(2, 60, 7), 58, 20, 21, 9):
        if Job.objects.filter(cluster=two, namespace="d", name=f"m-{k}").exists():
            continue
        _job(two, "d", f"m-{k}", w=k % 4 + 1, **({"x": 2} if k % 5 == 0 else {}), **({"z": 0} if k == 9 else {}))
        if k % 6 == 0:
            Allocation.objects.create(node=node, pod=f"d/m-{k}-w-0", container="c", cpus=str(k % 8))
    _job(one, "d", "m-1-w", **{"1": 3})  # d/m-1-w-1-<i> beside d/m-1-w-<i> of cluster two's job m-1
    return one, two


@pytest.mark.parametrize("where", [None, "one", "two"])
def test_every_pod_without_a_query_counts_and_pages_as_brute_force(many, where):
    """No `q` (the API's default): the count is the database's, the page reads only the groups it reaches;
    every page size against every pod built and sorted."""
    cluster = None if where is None else Cluster.objects.get(name=where).pk
    expected = _reference("", cluster)
    assert len(expected) > 150
    for limit in (1, 2, 7, 30, 64, 100, 151, 500):
        count, shown = find_pods("", cluster, limit)
        got = [(m.uid, m.node[1] if m.node else "", (m.job[1], m.task) if m.job and m.task else None) for m in shown]
        assert count == len(expected), (where, limit)
        assert got == expected[:limit], (where, limit)


def test_every_pod_reads_only_the_groups_its_page_reaches(monkeypatch):
    """300 jobs: a page of 5 with no query builds a handful of groups, not 300, and still counts them all."""
    cluster = Cluster.objects.create(name="wide")
    jobs = Job.objects.bulk_create([Job(cluster=cluster, namespace="w", name=f"j{j:03d}") for j in range(300)])
    Task.objects.bulk_create([Task(job=job, name="t", replicas=2, template={}) for job in jobs])
    built, real = [], pod_search._whole

    def counted(group, into):
        built.append(group.prefix)
        return real(group, into)

    monkeypatch.setattr(pod_search, "_whole", counted)
    count, shown = find_pods("", cluster.pk, 5)
    assert count == 600
    assert [m.uid for m in shown] == ["w/j000-t-0", "w/j000-t-1", "w/j001-t-0", "w/j001-t-1", "w/j002-t-0"]
    assert len(built) < 40
