"""Issue 30's acceptance, for real: a run that kills its worker every time it starts (a prefork pool child
SIGKILLed, as out of memory would) is run again from scratch until NUMAWEB_RUN_MAX_RUNS starts, then failed naming
the cap — for a comparison's last variant (the comparison then closes, failed, and its page says why) and for a
make-room question alike. Before, only sessions had a cap, and a comparison whose last variant was failed by
housekeeping stayed "running" for ever."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from numaweb.comparisons import services as comparisons
from numaweb.comparisons.models import Comparison
from numaweb.inventory.models import Cluster
from numaweb.room import services as room
from numaweb.room import tasks as room_tasks
from numaweb.room.models import RoomPlan
from tests.web.helpers import filesystem_broker, make_job, make_node
from tests.worker.test_worker_lost import wait_for, wait_ready, worker_process

pytestmark = pytest.mark.django_db(transaction=True)
CAP = 3
ENV = {"NUMAWEB_RUN_MAX_RUNS": str(CAP), "NUMAWEB_WORKER_TIMEOUT": "6", "NUMAWEB_TEST_DOOMED": "unaware"}


@pytest.fixture
def cluster(db) -> Cluster:
    cluster = Cluster.objects.create(name="doomed")
    make_node(cluster, "n1", (2, 1, 4, 1), "single-numa-node")
    make_node(cluster, "n2", (2, 1, 4, 1), "best-effort")
    make_job("a", cpus="2", replicas=2, policy="single-numa-node")
    return cluster


def test_a_comparisons_last_variant_killing_its_worker_ends_failed_at_the_cap(cluster, tmp_path, viewer_client):
    log = tmp_path / "pool.log"
    with filesystem_broker(tmp_path / "broker"), worker_process(
            tmp_path, "prefork", "pool", module="tests.worker.dying_worker", **ENV) as pool:
        wait_ready(pool, log)
        started = time.monotonic()
        comparison = comparisons.start_comparison(cluster, comparisons.parse_variants(
            cluster, [{"profile": "volcano"}, {"profile": "unaware"}]))
        closed = wait_for("the comparison closed", lambda: Comparison.objects.filter(
            pk=comparison.pk, finished_at__isnull=False).first(), pool, log, timeout=120)
        took = time.monotonic() - started
    assert closed.status == "failed" and closed.finished
    done, doomed = closed.variants.order_by("index")
    assert done.status == "done" and done.runs == 1
    assert doomed.status == "failed" and doomed.runs == CAP, doomed.error
    assert doomed.error.startswith("worker lost: ") and doomed.error.endswith(
        f"not run again: started {CAP} times (NUMAWEB_RUN_MAX_RUNS)")
    page = viewer_client.get(reverse("comparisons:detail", args=[comparison.pk])).content.decode()
    assert 'data-status="failed"' in page and "(NUMAWEB_RUN_MAX_RUNS)" in page
    print(f"comparison closed failed at the cap after {took:.1f} s")


def test_a_make_room_question_killing_its_worker_ends_failed_at_the_cap(cluster, tmp_path, viewer_client):
    job = make_job("unaware", cpus="1")  # the question for this job kills its worker (NUMAWEB_TEST_DOOMED)
    log = tmp_path / "pool.log"
    with filesystem_broker(tmp_path / "broker"), worker_process(
            tmp_path, "prefork", "pool", module="tests.worker.dying_worker", **ENV) as pool:
        wait_ready(pool, log)
        row = room_tasks.start(room.parse_request(cluster, {"job": job.pk}))
        row = wait_for("the question failed", lambda: RoomPlan.objects.filter(pk=row.pk, status="failed").first(),
                       pool, log, timeout=120)
    assert row.runs == CAP and row.error.startswith("worker lost: ") and row.error.endswith(
        f"not run again: started {CAP} times (NUMAWEB_RUN_MAX_RUNS)"), row.error
    page = viewer_client.get(reverse("room:detail", args=[row.pk])).content.decode()
    assert 'data-status="failed"' in page and "(NUMAWEB_RUN_MAX_RUNS)" in page
