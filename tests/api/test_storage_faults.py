"""A full disk answers 503 with Retry-After, never 500 (issue 21). The embedded database is made full for real:
SQLite's max_page_count caps the file at its current size, so the next write fails with SQLITE_FULL ("database or
disk is full") exactly as on a full file system. Reads keep working, nothing is half-written, and once there is
room again the same write succeeds."""

from __future__ import annotations

import errno

import pytest
from django.db import connection

from numaweb.faults import storage_full
from numaweb.inventory.models import Cluster
from numaweb.jobs.models import Job
from tests.web.helpers import make_job


@pytest.fixture
def full_database(db):
    """Caps the test connection's database at its current size (pages already free inside it are used first:
    the big manifest below needs far more); yields a function that lifts the cap. The one cluster the jobs go
    into is made first."""
    Cluster.objects.create(name="c")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute(f"PRAGMA max_page_count = {pages}")

    def room() -> None:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA max_page_count = 4294967294")

    yield room
    room()


def manifest(name: str) -> str:
    """A Volcano Job of about 900 KB (long annotations): a few hundred database pages."""
    return (f"apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n"
            + "".join(f"    a{i}: {'x' * 1000}\n" for i in range(900))
            + "spec:\n  minAvailable: 1\n  tasks:\n    - replicas: 1\n      name: t\n      template:\n        spec:\n"
            "          containers:\n            - name: c\n              resources:\n                requests:\n"
            "                  cpu: 1\n                limits:\n                  cpu: 1\n")


def test_a_full_database_answers_503_and_keeps_what_it_has(api, client, full_database):
    stored = make_job("stored")
    before = Job.objects.count()
    codes = []
    for i in range(40):  # free pages left inside the file take the first writes; then it is full
        codes.append(api.post("/api/jobs/", {"manifest": manifest(f"big-{i}")}, format="json"))
        if codes[-1].status_code != 201:
            break
    r = codes[-1]
    assert r.status_code == 503, r.content[:300]
    assert r.json() == {"detail": "the server's storage is full: nothing was written; try again later"}
    assert r["Retry-After"] == "60"
    written = len(codes) - 1
    assert Job.objects.count() == before + written  # the refused one left nothing behind
    # reads of what is stored are still answered
    assert api.get(f"/api/jobs/{stored.pk}/").status_code == 200
    assert client.get("/jobs/").status_code == 200
    full_database()  # space returns: the same write goes through, nothing was lost meanwhile
    assert api.post("/api/jobs/", {"manifest": manifest(f"big-{written}")}, format="json").status_code == 201
    assert Job.objects.count() == before + written + 1 and Job.objects.filter(pk=stored.pk).exists()


def test_a_full_file_system_is_recognised():
    try:
        with open("/dev/full", "w") as fh:  # Linux's always-full device: a real ENOSPC
            fh.write("x")
    except OSError as exc:
        assert exc.errno == errno.ENOSPC and storage_full(exc)
        wrapped = RuntimeError("could not queue")
        wrapped.__cause__ = exc
        assert storage_full(wrapped)
    else:
        raise AssertionError("/dev/full accepted a write")
    assert not storage_full(OSError(errno.EACCES, "denied"))
    assert not storage_full(ValueError("database or disk is full"))
