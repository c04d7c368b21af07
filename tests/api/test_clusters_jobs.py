"""Two clusters side by side (the demo and a smaller `demo --cluster big`): jobs belong to one cluster, and a
session, a comparison and a headroom query on each touch only their own cluster's jobs and nodes."""

from __future__ import annotations

import pytest

from numaweb.comparisons.models import Comparison
from numaweb.inventory.demo import build_demo
from numaweb.inventory.large_demo import build_large_demo
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs import lifecycle
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling.models import Placement, SchedulingSession

from .test_jobs import job_body


@pytest.fixture
def two(db):
    """The demo cluster and a 40-node, 80-pod large demo (its jobs in namespace "big")."""
    demo = build_demo("demo")
    big = build_large_demo("big", nodes=40, pods=80, seed=3)
    return demo, big


def _ids(cluster: Cluster) -> set[int]:
    return set(Job.objects.filter(cluster=cluster).values_list("pk", flat=True))


def test_jobs_carry_their_cluster_and_filter_by_it(api, two):
    demo, big = two
    assert _ids(demo) and _ids(big) and not _ids(demo) & _ids(big)
    for cluster in two:
        body = api.get(f"/api/jobs/?cluster={cluster.pk}&page_size=1000").json()
        rows = body["results"] if isinstance(body, dict) else body
        assert {j["id"] for j in rows} == _ids(cluster)
        assert {j["cluster"] for j in rows} == {cluster.pk}
    assert api.get("/api/jobs/?cluster=x").status_code == 400


def test_one_name_per_cluster_and_namespace(api, two):
    _demo, big = two
    for cluster in two:
        r = api.post("/api/jobs/", job_body(name="same", cluster=cluster.pk), format="json")
        assert r.status_code == 201 and r.json()["cluster"] == cluster.pk, r.content
    again = api.post("/api/jobs/", job_body(name="same", cluster=big.pk), format="json")
    assert again.status_code == 400 and again.json()["name"] == ["job default/same already exists in cluster big"]
    # with two clusters the cluster must be said
    r = api.post("/api/jobs/", job_body(name="where"), format="json")
    assert r.status_code == 400 and "2 clusters exist" in r.json()["cluster"][0]


def test_a_session_on_each_cluster_takes_only_its_jobs_and_nodes(api, two, eager,
                                                               django_capture_on_commit_callbacks):
    for cluster in two:
        with django_capture_on_commit_callbacks(execute=True):
            r = api.post("/api/sessions/", {"cluster": cluster.pk, "profile": "aligned"}, format="json")
        assert r.status_code == 202, r.content
        session = SchedulingSession.objects.get(pk=r.json()["id"])
        assert session.status == "done", session.error
        expected = {j.pk for j in job_services.schedulable_jobs(cluster)} | set(
            Job.objects.filter(cluster=cluster, status="scheduled").values_list("pk", flat=True))
        assert set(session.jobs.values_list("pk", flat=True)) <= _ids(cluster)
        assert set(session.jobs.values_list("pk", flat=True)) == expected
        placed = Placement.objects.filter(session=session).exclude(node=None)
        assert placed.exists()
        assert set(placed.values_list("node__cluster", flat=True)) == {cluster.pk}
        written = Allocation.objects.filter(session=session)
        assert written.exists()
        assert set(written.values_list("cluster", flat=True)) == {cluster.pk}
        assert set(written.values_list("node__cluster", flat=True)) == {cluster.pk}
        assert set(written.values_list("job__cluster", flat=True)) == {cluster.pk}


def test_naming_another_clusters_job_is_a_400_naming_it(api, two):
    demo, big = two
    stranger = Job.objects.filter(cluster=big).order_by("pk").first()
    r = api.post("/api/sessions/", {"cluster": demo.pk, "jobs": [stranger.pk]}, format="json")
    assert r.status_code == 400
    assert r.json()["jobs"] == [f"job {stranger} belongs to cluster big, not to cluster demo"]
    r = api.post("/api/comparisons/", {"cluster": demo.pk, "jobs": [stranger.pk],
                                       "variants": [{"profile": "aligned"}]}, format="json")
    assert r.status_code == 400 and f"job {stranger} belongs to cluster big" in r.json()["jobs"][0]
    assert not SchedulingSession.objects.exists() and not Comparison.objects.exists()


def test_a_comparison_takes_exactly_the_jobs_a_session_would(api, two, eager, django_capture_on_commit_callbacks):
    demo, _big = two
    # one demo job partly held, one finished: neither a pending-only rule nor every job would match
    lifecycle.finish_job(Job.objects.get(cluster=demo, name="numa-test"))
    for cluster in two:
        with django_capture_on_commit_callbacks(execute=True):
            r = api.post("/api/comparisons/", {"cluster": cluster.pk, "variants": [{"profile": "aligned"}],
                                               "shape": {"cpu": "2", "memory": "1Gi"}}, format="json")
        assert r.status_code == 202, r.content
        body = api.get(r.headers["Location"]).json()
        assert body["status"] == "done", body
        assert body["jobs"] == [j.pk for j in job_services.schedulable_jobs(cluster)]
        assert body["snapshot_nodes"] == Node.objects.filter(cluster=cluster).count()
        comparison = Comparison.objects.get(pk=body["id"])
        assert set(comparison.snapshot) == set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
        assert body["variants"][0]["metrics"]["pods"] == sum(
            max(0, j.pods - j.held) for j in job_services.schedulable_jobs(cluster))


def test_headroom_on_each_cluster_counts_its_own_nodes(api, two):
    for cluster in two:
        r = api.get(f"/api/clusters/{cluster.pk}/headroom/?cpu=2&memory=1Gi&profile=aligned")
        assert r.status_code == 200, r.content
        names = [n["node"] for n in r.json()["nodes"]]
        assert sorted(names) == sorted(Node.objects.filter(cluster=cluster, removed_at=None)
                                       .values_list("name", flat=True))
