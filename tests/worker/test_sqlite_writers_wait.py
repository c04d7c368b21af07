"""SQLite writers wait, never fail (issue 21): a 50,000-pod session's commit holds the embedded database's write
lock for seconds (11.7 s measured at 43,000 placed pods; it once outlasted the 10 s busy timeout and writers got
500 "database is locked"). Twenty API clients writing allocations and jobs all through that commit each get their
answer, done (201) or a clean 4xx, never a 5xx; the session commits everything it placed."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from numaweb.inventory.large_demo import build_large_demo
from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 20
PODS = 50_000


def _client(token: str) -> APIClient:
    client = APIClient(raise_request_exception=False)  # a 500 is an answer here, counted, not an exception
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_writers_wait_through_a_50000_pod_commit(token, settings):
    big = build_large_demo("large", nodes=3000, pods=PODS, seed=1)
    small = Cluster.objects.create(name="writers")
    nodes = [make_node(small, f"w{i}", (1, 1, 8, 1)) for i in range(WRITERS // 2)]
    session = services.create_session(big, "volcano", False, list(Job.objects.filter(namespace=big.name)))
    committing, finished = threading.Event(), threading.Event()
    window: dict[str, float] = {}

    def checkpoint(stage: str, _session) -> None:
        if stage == "computed":  # the engine is done: the commit starts now; release the writers
            window["start"] = time.monotonic()
            committing.set()

    settings_hook = services.checkpoint
    services.checkpoint = checkpoint
    answers: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        client = _client(token.key)
        committing.wait(timeout=600)
        n = 0
        try:
            while not finished.is_set() or n < 2:
                started = time.monotonic()
                if i % 2:
                    r = client.post("/api/allocations/", {"node": nodes[i // 2].pk, "pod": f"default/w{i}-{n}",
                                                          "cpus": str(n % 8)}, format="json")
                else:
                    r = client.post("/api/jobs/", {"cluster": small.pk, "name": f"w{i}-{n}", "namespace": "writers",
                                                   "tasks": [
                        {"name": "t", "replicas": 1, "template": {"containers": [
                            {"name": "c", "requests": {"cpu": "1", "memory": "1Gi"},
                             "limits": {"cpu": "1", "memory": "1Gi"}}]}}]}, format="json")
                with lock:
                    answers.append((r.status_code, started, time.monotonic()))
                n += 1
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    try:
        services.execute_session(session.pk)
    finally:
        window["end"] = time.monotonic()
        finished.set()
        committing.set()
        for t in threads:
            t.join(timeout=600)
        services.checkpoint = settings_hook
    session.refresh_from_db()
    assert session.status == SchedulingSession.DONE, session.error
    assert session.pods_total == PODS and session.pods_admitted > 0
    assert Allocation.objects.filter(session=session).count() > 0

    codes = sorted({code for code, _s, _e in answers})
    assert all(code < 500 for code in codes), codes
    # done, a clean conflict (a CPU another writer holds), or the API's write throttle (shared by every process:
    # twenty writers on one token go past NUMAWEB_API_WRITE_RATE during a long commit)
    assert set(codes) <= {201, 409, 429}, codes
    assert 201 in codes
    during = [(s, e) for _c, s, e in answers if s < window["end"]]
    assert len(during) >= WRITERS  # every writer asked while the commit held the database
    waited = max(e - s for s, e in during)
    assert waited > 1, f"no writer waited for the commit ({waited:.2f} s): the test did not overlap it"
    print(f"commit {session.commit_ms / 1000:.1f} s; {len(answers)} writes, the longest wait {waited:.1f} s")
