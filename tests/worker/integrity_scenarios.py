"""Concurrent writers against one database, as scenarios that return what they observed.

The SQLite tests call them in the pytest process; the PostgreSQL test runs
`python -m tests.worker.integrity_scenarios NAME` against its throwaway server (the pytest process itself
always uses SQLite) and reads the JSON printed. Each writer is a thread with its own connection, released
together by a barrier so their transactions really overlap."""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from django.db import connection

WRITERS = 20


def _threads(n: int, work) -> list:
    barrier = threading.Barrier(n)

    def one(i: int):
        try:
            barrier.wait()
            return work(i)
        finally:
            connection.close()

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def _client():
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from numaweb.access.roles import ADMIN, set_role

    user, _ = get_user_model().objects.get_or_create(username="race-writer")
    set_role(user, ADMIN)  # allocations are inventory: the admin role's
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def allocation_race(n: int = WRITERS) -> dict:
    """`n` API clients ask at once for CPU 3 of one node, each for its own pod."""
    from numaweb.inventory.models import Allocation, Cluster
    from tests.web.helpers import make_node

    node = make_node(Cluster.objects.create(name="race"), "p4")
    client = _client()

    def post(i: int):
        r = client.post("/api/allocations/", {"node": node.pk, "pod": f"default/p{i}", "cpus": "3"}, format="json")
        return r.status_code, r.json()

    results = _threads(n, post)
    winner = Allocation.objects.get(node=node)
    return {"codes": sorted(code for code, _ in results),
            "conflicts": [body for code, body in results if code == 409],
            "allocations": Allocation.objects.filter(node=node).count(), "winner": winner.pod}


def session_race(n: int = WRITERS) -> dict:
    """`n` sessions over overlapping jobs (each names three of eight, with gangs) run at once on a
    cluster too small for all of them."""
    from numaweb.inventory.models import Allocation, Cluster
    from numaweb.jobs.models import Job
    from numaweb.scheduling import services
    from numaweb.scheduling.models import SchedulingSession
    from scheduler_core.model.cpuset import CPUSet
    from tests.web.helpers import make_job, make_node

    cluster = Cluster.objects.create(name="srace")
    nodes = [make_node(cluster, f"n{i}", shape=(1, 1, 4, 1)) for i in range(3)]  # 12 CPUs in all
    jobs = [make_job(f"j{i}", cpus="2", replicas=1 + i % 3) for i in range(8)]  # 24 pods' worth of demand
    sessions = []
    for i in range(n):
        s = SchedulingSession.objects.create(cluster=cluster, profile=("volcano", "aligned")[i % 2])
        s.jobs.set([jobs[i % 8], jobs[(i + 1) % 8], jobs[(i + 3) % 8]])
        sessions.append(s)
    _threads(n, lambda i: services.execute_session(sessions[i].pk).status)
    per_cpu: Counter = Counter()
    per_pod: Counter = Counter()
    for a in Allocation.objects.filter(cluster=cluster):
        per_pod[(a.pod, a.container)] += 1
        for cpu in CPUSet.parse(a.cpus):
            per_cpu[(a.node_id, cpu)] += 1
    held = Counter()
    for job_id, _pod in Allocation.objects.filter(cluster=cluster).values_list("job_id", "pod").distinct():
        held[job_id] += 1
    return {
        "sessions": Counter(SchedulingSession.objects.filter(cluster=cluster).values_list("status", flat=True)),
        "errors": sorted({s.error for s in SchedulingSession.objects.filter(cluster=cluster) if s.error}),
        "cpus_held_twice": [k for k, v in per_cpu.items() if v > 1],
        "pods_held_twice": [k for k, v in per_pod.items() if v > 1],
        "cpus_held": sum(per_cpu.values()), "nodes": len(nodes),
        "jobs": [{"name": j.name, "status": j.status, "reason": j.reason, "replicas": j.replicas,
                  "held": held[j.pk]} for j in Job.objects.prefetch_related("tasks").order_by("id")],
    }


def create_race(kind: str, n: int = WRITERS) -> dict:
    """`n` API clients create a job (kind "job") or a cluster (kind "cluster") of one name at once."""
    from numaweb.inventory.models import Cluster
    from numaweb.jobs.models import Job

    client = _client()
    if kind == "job":
        cluster = Cluster.objects.create(name="jrace")
        res = {"cpu": "1", "memory": "1Gi"}
        url, body = "/api/jobs/", {"cluster": cluster.pk, "name": "same", "tasks": [
            {"name": "t", "template": {"containers": [{"name": "c", "requests": res, "limits": res}]}}]}
    else:
        url, body = "/api/clusters/", {"name": "same"}

    def post(i: int):
        r = client.post(url, body, format="json")
        return r.status_code, r.content.decode()

    results = _threads(n, post)
    rows = Job.objects.filter(name="same").count() if kind == "job" else Cluster.objects.filter(name="same").count()
    return {"codes": sorted(code for code, _ in results), "rows": rows,
            "refusals": [body for code, body in results if code != 201]}


def job_create_race(n: int = WRITERS) -> dict:
    return create_race("job", n)


def cluster_create_race(n: int = WRITERS) -> dict:
    return create_race("cluster", n)


FINISH_DELAYS = (0.0, 0.1, 0.3)
FINISH_RUNS = 20


def finish_race(runs: int = FINISH_RUNS) -> dict:
    """A job is finished through the API 0, 0.1 or 0.3 s after its session starts running (runs in turn),
    while the session computes and commits in another thread. Whichever lands first, the finished job must
    hold nothing afterwards: a commit that comes second skips its pods (saying so), a finish that comes
    second releases what the commit wrote."""
    import time

    from numaweb.inventory.models import Allocation, Cluster
    from numaweb.jobs.models import Job
    from numaweb.scheduling import services
    from numaweb.scheduling.models import SchedulingSession
    from tests.web.helpers import make_job, make_node

    cluster = Cluster.objects.create(name="frace")
    for i in range(100):
        make_node(cluster, f"n{i}", shape=(2, 1, 16, 1))  # 3,200 CPUs
    client = _client()
    outcomes, held_after, statuses, seconds = Counter(), [], Counter(), []
    for run in range(runs):
        delay = FINISH_DELAYS[run % len(FINISH_DELAYS)]
        job = make_job(f"r{run}", cpus="2", replicas=1500, policy="best-effort", cluster=cluster)  # 3,000 CPUs
        session = SchedulingSession.objects.create(cluster=cluster, profile="volcano")
        session.jobs.set([job])

        def work(i: int, job=job, session=session, delay=delay):
            if i == 0:
                started = time.perf_counter()
                services.execute_session(session.pk)
                return time.perf_counter() - started
            while not SchedulingSession.objects.filter(pk=session.pk, status="running").exists():
                time.sleep(0.002)
            time.sleep(delay)
            return client.post(f"/api/jobs/{job.pk}/finish/").status_code

        took, code = _threads(2, work)
        seconds.append(took)
        session.refresh_from_db()
        job.refresh_from_db()
        statuses[f"{session.status}/{job.status}/{code}"] += 1
        skipped = session.placements.filter(status="skipped", message__contains="was finished while the session ran")
        outcomes["commit skipped the finished job" if skipped.exists() else "finish released the commit's pods"] += 1
        held_after.append(Allocation.objects.filter(job=job).count())
        Allocation.objects.filter(cluster=cluster).delete()  # the next run starts on an empty cluster
    return {"held_after": held_after, "outcomes": dict(outcomes), "statuses": dict(statuses),
            "session_seconds": sorted(round(s, 3) for s in seconds),
            "finished": Job.objects.filter(cluster=cluster, status="finished").count()}


SCENARIOS = {"allocation_race": allocation_race, "session_race": session_race, "job_create_race": job_create_race,
             "cluster_create_race": cluster_create_race, "finish_race": finish_race}

if __name__ == "__main__":
    import django

    django.setup()
    print(json.dumps(SCENARIOS[sys.argv[1]](), default=str))
