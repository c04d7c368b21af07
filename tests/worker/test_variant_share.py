"""Issue 37, row 7 (a comparison's share of the workers), on a real Celery worker over a real Redis: before, the
variants of one comparison took every worker process, and a one-pod session started after them waited for all of
them. Now, while a session waits, variants run on at most NUMAWEB_VARIANT_SHARE processes: the others step back
(sent again a moment later), so the session runs as soon as one process is free and the comparison still ends."""

import time

import pytest
from celery.contrib.testing.worker import start_worker

from numaweb.celery import app
from numaweb.comparisons import services as comparisons
from numaweb.comparisons.models import Comparison
from numaweb.inventory.models import Cluster
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import SchedulingSession
from tests.web.helpers import make_job, make_node, use_broker

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]
VARIANT_SECONDS = 3.0


def until(what, check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"no {what} after {timeout} s")


def test_a_session_does_not_wait_behind_every_variant_of_a_comparison(redis_url, settings, monkeypatch):
    settings.NUMAWEB_VARIANT_SHARE = 1
    cluster = Cluster.objects.create(name="share")
    make_node(cluster, "n1")
    make_job("j1", cpus="1")
    real = comparisons.run_variant

    def slow_variant(*args, **kwargs):  # a variant of a large cluster: it holds its worker process a while
        time.sleep(VARIANT_SECONDS)
        return real(*args, **kwargs)

    monkeypatch.setattr(comparisons, "run_variant", slow_variant)
    with use_broker(redis_url), start_worker(app, pool="threads", concurrency=2, perform_ping_check=False,
                                             shutdown_timeout=30):
        comparison = comparisons.start_comparison(cluster, comparisons.parse_variants(
            cluster, [{"profile": p} for p in ("volcano", "aligned", "unaware", "volcano")]))
        until("two variants running", lambda: comparison.variants.filter(status="running").count() == 2)
        session = scheduling.start_session(cluster, "volcano", dry_run=True)  # both processes are busy now
        asked = time.monotonic()
        until("the session done", lambda: SchedulingSession.objects.filter(pk=session.pk, status="done").exists())
        waited = time.monotonic() - asked
        until("the comparison closed", lambda: Comparison.objects.filter(
            pk=comparison.pk, finished_at__isnull=False).exists(), timeout=90)
    session.refresh_from_db()
    variants = list(comparison.variants.order_by("started_at"))
    assert [v.status for v in variants] == ["done"] * 4 and all(v.runs == 1 for v in variants)
    # it ran as soon as the first two variants left a process free, not after the last two as well
    assert session.started_at < variants[-1].started_at
    assert waited < 2 * VARIANT_SECONDS, waited
    print(f"the session waited {waited:.1f} s behind a comparison of 4 variants of {VARIANT_SECONDS:.0f} s")
