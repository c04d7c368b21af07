"""How many job pods there are, and how many of them hold something, without reading every task.

A job's pods are `<namespace>/<job>-<task>-<i>` for `i` below the task's replicas; two tasks whose names join
into the same prefix name the same pods, so the job pods are, per distinct prefix, its largest replica count.
Grouping 22,000 tasks by their joined names costs the database about 60 ms; the sum of the replica counts is
an index scan. The two agree unless two tasks can share a prefix, and that needs one of: a task name with a
`-` (job `a-b` task `c` and job `a` task `b-c`: the first job's name has a `-` too), a namespace with a `/`, or
the same job in two clusters (counted over every cluster). Only those tasks are grouped (none, usually).

The held pods among them are found from the held pods' names, not from the tasks: each name is split every
way it could be `<namespace>/<job>-<task>-<i>`, and only the tasks so named are read."""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection
from django.db.models import CharField, Count, Max, Q, QuerySet, Sum, Value
from django.db.models.functions import Concat

from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs.models import Job, Task

#: a task's pods' name prefix, `<namespace>/<job>-<task>-`
PREFIX = Concat("job__namespace", Value("/"), "job__name", Value("-"), "name", Value("-"), output_field=CharField())
DIGITS = "0123456789"
#: held pod names looked up per query
CHUNK = 500


def tasks_of(cluster: int | None) -> QuerySet[Task]:
    return Task.objects.all() if cluster is None else Task.objects.filter(job__cluster_id=cluster)


def job_pods(cluster: int | None) -> int:
    """How many distinct pods the tasks (of the cluster, or of all) name: each prefix's largest replica count,
    summed."""
    tasks = tasks_of(cluster)
    total = tasks.aggregate(n=Sum("replicas"))["n"] or 0
    shared = _may_share(tasks, cluster)
    if shared is None:
        return total
    groups = tasks.filter(shared).annotate(prefix=PREFIX).values("prefix").annotate(
        top=Max("replicas"), every=Sum("replicas")).order_by()
    sql, params = groups.query.sql_with_params()
    with connection.cursor() as cursor:  # summed in the database (the ORM aggregates one annotation only)
        cursor.execute(f"SELECT SUM(top), SUM(every) FROM ({sql}) grouped", params)
        top, every = cursor.fetchone()
    return total - (every or 0) + (top or 0)


def _may_share(tasks: QuerySet[Task], cluster: int | None) -> Q | None:
    """The tasks that may share a prefix with another of `tasks` (None: no two can)."""
    jobs = Job.objects.all() if cluster is None else Job.objects.filter(cluster_id=cluster)
    if jobs.filter(namespace__contains="/").exists():  # read from the (cluster, namespace, name) index
        return Q()
    if cluster is None and len(Job.objects.values("cluster_id").distinct().order_by()[:2]) > 1 and \
            Job.objects.values("namespace", "name").annotate(n=Count("id")).filter(n__gt=1).order_by().exists():
        return Q()
    if tasks.filter(name__contains="-").exists():
        return Q(name__contains="-") | Q(job__name__contains="-")
    return None


def held_job_pods(held: QuerySet[Allocation], cluster: int | None) -> int:
    """How many distinct held pod names (of `held`) are pods of the tasks (of the cluster, or of all): the jobs
    their names could be are looked up by (cluster, namespace, name), the unique index's columns, and only those
    jobs' tasks so named are read."""
    uids = list(held.order_by().values_list("pod", flat=True).distinct())
    clusters = [cluster] if cluster is not None else list(Cluster.objects.values_list("pk", flat=True))
    found = 0
    for start in range(0, len(uids), CHUNK):
        wanted: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
        for uid in uids[start:start + CHUNK]:
            prefix = uid.rstrip(DIGITS)
            text = uid[len(prefix):]
            if not text or (text[0] == "0" and text != "0") or not prefix.endswith("-"):
                continue
            for names in _splits(prefix[:-1]):
                wanted.setdefault(names, []).append((uid, int(text)))
        jobs = {pk: (namespace, name) for pk, namespace, name in Job.objects.filter(
            cluster_id__in=clusters, namespace__in={n[0] for n in wanted}, name__in={n[1] for n in wanted},
        ).values_list("pk", "namespace", "name")} if wanted else {}
        if not jobs:
            continue
        pods: set[str] = set()
        for job_id, task, replicas in Task.objects.filter(job_id__in=jobs, name__in={n[2] for n in wanted}
                                                          ).values_list("job_id", "name", "replicas"):
            pods.update(uid for uid, index in wanted.get((*jobs[job_id], task), ()) if index < replicas)
        found += len(pods)
    return found


def _splits(body: str) -> Iterator[tuple[str, str, str]]:
    """Every (namespace, job, task) whose `<namespace>/<job>-<task>` is `body`."""
    slash = body.find("/")
    while slash >= 0:
        dash = body.find("-", slash + 1)
        while dash >= 0:
            yield body[:slash], body[slash + 1:dash], body[dash + 1:]
            dash = body.find("-", dash + 1)
        slash = body.find("/", slash + 1)
