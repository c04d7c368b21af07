"""What a session reads of the jobs: which it takes, the check at submission, and the engine Jobs it
builds from the rows. Each is a fixed number of queries, whatever the number of jobs."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from scheduler_core.model.jobs import Job as EngineJob
from scheduler_core.model.jobs import Task as EngineTask
from scheduler_core.model.pods import Container, Pod

pytestmark = pytest.mark.django_db


def _engine_job(name: str, replicas: tuple[int, ...], min_available: int | None = None) -> EngineJob:
    c = Container("c", {"cpu": 2000, "memory": 1 << 30}, {"cpu": 2000, "memory": 1 << 30})
    init = Container("setup", {"cpu": 1000}, {"cpu": 1000}, "init")
    tasks = tuple(EngineTask(f"t{i}", Pod(f"{name}-t{i}", (c,), (init,) if i else (), namespace="ns",
                                          topology_policy="restricted" if i else None),
                             n, "single-numa-node" if i else None)
                  for i, n in enumerate(replicas))
    return EngineJob(name, tasks, min_available, priority=len(name), queue="q", namespace="ns")


def _cluster() -> Cluster:
    return Cluster.objects.get_or_create(name="c1")[0]


def _hold(job: Job, pod: str, container: str = "") -> None:
    cluster = _cluster()
    node = Node.objects.get_or_create(cluster=cluster, name="n1", defaults={"topology": {}})[0]
    Allocation.objects.create(cluster=cluster, node=node, job=job, pod=pod, container=container)


def test_engine_jobs_rebuild_what_was_saved_in_two_queries():
    originals = [_engine_job("alpha", (2, 3), 4), _engine_job("be", (1,)), _engine_job("gamma", (1, 1, 2))]
    rows = [job_services.save_job(j, _cluster(), manifest="x" * 1000) for j in originals]
    with CaptureQueriesContext(connection) as queries:
        loaded_rows, engine = job_services.engine_jobs(Job.objects.filter(pk__in=[r.pk for r in rows]))
    assert len(queries) == 2
    assert [r.pk for r in loaded_rows] == sorted(r.pk for r in rows)
    # the same jobs, submitted in id order (the engine's tie-break), task order and pods as saved
    expected = [EngineJob(j.name, j.tasks, j.min_available, j.priority, j.queue, j.namespace, r.pk)
                for j, r in zip(originals, rows, strict=True)]
    assert engine == expected
    assert "manifest" in loaded_rows[0].get_deferred_fields()


def test_schedulable_jobs_and_the_check_in_one_query_each():
    pending = job_services.save_job(_engine_job("pending", (2,)), _cluster())
    partly = job_services.save_job(_engine_job("partly", (1, 2)), _cluster())
    full = job_services.save_job(_engine_job("full", (1, 1)), _cluster())
    done = job_services.save_job(_engine_job("done", (1,)), _cluster())
    Job.objects.filter(pk=done.pk).update(finished_at=timezone.now())
    _hold(partly, "ns/partly-t0-0", "c")
    _hold(partly, "ns/partly-t0-0", "d")  # two containers of one pod: one pod held
    _hold(partly, "ns/partly-t1-0")
    _hold(full, "ns/full-t0-0")
    _hold(full, "ns/full-t1-0")

    cluster = _cluster()
    with CaptureQueriesContext(connection) as queries:
        chosen = job_services.schedulable_jobs(cluster)
    assert len(queries) == 1
    assert [j.pk for j in chosen] == [pending.pk, partly.pk]

    with CaptureQueriesContext(connection) as queries:
        job_services.check_schedulable(chosen)
    assert len(queries) == 1
    with pytest.raises(job_services.NotSchedulable) as exc:
        job_services.check_schedulable([pending, full, Job.objects.get(pk=done.pk)])
    assert str(exc.value) == ("job ns/full is already scheduled: all its 2 pods hold resources (finish it to release "
                              "them); job ns/done is finished")


def test_check_counts_only_the_pods_left(settings):
    """The session bound counts the pods a session would place: those not already holding resources."""
    from numaweb.jobs.bounds import OutOfBounds

    settings.NUMAWEB_MAX_PODS_PER_SESSION = 3
    job = job_services.save_job(_engine_job("big", (4,)), _cluster())
    with pytest.raises(OutOfBounds):
        job_services.check_schedulable([job])
    _hold(job, "ns/big-t0-0")
    job_services.check_schedulable([job])


def test_a_job_named_twice_is_linked_once():
    job = job_services.save_job(_engine_job("twice", (1,)), _cluster())
    cluster = Cluster.objects.create(name="c2")
    session = services.create_session(cluster, "volcano", True, [job, job])
    assert session.job_count == 1 and list(session.jobs.values_list("pk", flat=True)) == [job.pk]
