"""The jobs page works in one chosen cluster: its table and the session and comparison forms list only
that cluster's jobs, a job is submitted into it, and another cluster's job posted anyway is refused by name."""

import re

import pytest
from django.urls import reverse

from numaweb.inventory.large_demo import build_large_demo
from numaweb.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def big(db):
    return build_large_demo("big", nodes=10, pods=20, seed=2)


def _checkboxes(html: str, form_id: str) -> set[int]:
    """The jobs a form can pick: the list's checkboxes that belong to it (by their form attribute)."""
    return {int(v) for v in re.findall(rf'type="checkbox" name="(?:cmp-)?jobs" value="(\d+)" form="{form_id}"', html)}


def test_the_page_lists_and_offers_only_the_chosen_clusters_jobs(client, demo, big):
    for cluster in (demo, big):
        html = client.get(reverse("pages:jobs") + f"?cluster={cluster.pk}").content.decode()
        own = set(Job.objects.filter(cluster=cluster).values_list("pk", flat=True))
        names = set(re.findall(r'<tr data-job="([^"]+)"', html))
        assert names == set(Job.objects.filter(cluster=cluster).values_list("name", flat=True))
        assert _checkboxes(html, "session-form") == own
        assert _checkboxes(html, "compare-form") == own
        for name in ("cluster", "cmp-cluster"):
            assert f'type="hidden" name="{name}" value="{cluster.pk}"' in html


def test_a_job_is_submitted_into_the_chosen_cluster(client, demo, big):
    data = {"cluster": big.pk, "name": "numa-test", "namespace": "default", "task": "main", "replicas": "1",
            "cpu": "1", "memory": "1Gi", "guaranteed": "on"}
    response = client.post(reverse("pages:jobs"), data)
    assert response.status_code == 302  # demo has a default/numa-test too: names are per cluster
    assert Job.objects.get(cluster=big, name="numa-test").namespace == "default"
    again = client.post(reverse("pages:jobs"), data)
    assert again.status_code == 422 and "job default/numa-test already exists in cluster big" in again.content.decode()


def test_another_clusters_job_is_refused_by_name(client, demo, big):
    stranger = Job.objects.filter(cluster=big).order_by("pk").first()
    response = client.post(reverse("pages:session-start"), {"cluster": demo.pk, "profile": "volcano",
                                                             "jobs": [stranger.pk]})
    assert response.status_code == 422
    assert f"job {stranger} belongs to cluster big, not to cluster demo" in response.content.decode()


def test_a_session_started_on_the_page_takes_its_clusters_jobs(client, demo, big):
    from numaweb.scheduling.models import SchedulingSession

    for cluster in (demo, big):
        response = client.post(reverse("pages:session-start"), {"cluster": cluster.pk, "profile": "aligned",
                                                                 "dry_run": "on"})
        assert response.status_code == 302, response.content[:500]
        session = SchedulingSession.objects.latest("pk")
        jobs = set(session.jobs.values_list("pk", flat=True))
        assert session.cluster == cluster and jobs
        assert jobs == set(Job.objects.filter(cluster=cluster).values_list("pk", flat=True))
    job = Job.objects.filter(cluster=big).first()
    html = client.get(reverse("pages:job", args=[job.pk])).content.decode()
    assert f'<a href="/jobs/?cluster={big.pk}" data-cluster>big</a>' in html


def test_a_comparison_and_headroom_on_the_pages_stay_in_their_cluster(client, demo, big):
    from numaweb.comparisons.models import Comparison
    from numaweb.inventory.models import Node
    from numaweb.jobs import services as job_services
    from tests.pages.test_comparisons import form_data

    for cluster in (demo, big):
        response = client.post(reverse("comparisons:start"), form_data(cluster))
        assert response.status_code == 302, response.content[:500]
        comparison = Comparison.objects.latest("pk")
        assert comparison.cluster == cluster
        assert sorted(comparison.jobs.values_list("pk", flat=True)) == [j.pk for j in
                                                                         job_services.schedulable_jobs(cluster)]
        assert set(comparison.snapshot) == set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
        query = {"cluster": cluster.pk, "hr-cpu": "2", "hr-memory": "1Gi", "hr-profile": "aligned"}
        html = client.get(reverse("home"), query, headers={"HX-Request": "true", "HX-Target": "node-list"})
        answered = set(re.findall(r'data-node="([^"]+)"[^>]*>', html.content.decode()))
        assert answered and answered <= set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
    stranger = Job.objects.filter(cluster=big).first()
    response = client.post(reverse("comparisons:start"), {**form_data(demo), "cmp-jobs": [stranger.pk]})
    assert response.status_code == 422 and f"job {stranger} belongs to cluster big" in response.content.decode()


def test_a_posted_cluster_that_is_no_ascii_number_is_no_cluster(demo):
    """'²' passes str.isdigit() but not int(): the form's cluster is None, not a ValueError (a 500)."""
    from django import forms

    from numaweb.jobs.forms import chosen_cluster

    assert chosen_cluster(forms.Form(data={"cluster": "²"})) is None
    assert chosen_cluster(forms.Form(data={"cluster": str(demo.pk)})) == demo


def test_a_cluster_query_that_is_no_ascii_number_shows_the_first_cluster(client, demo, big):
    """`?cluster=²` on the jobs page: the first cluster by name, not a ValueError (a 500)."""
    response = client.get(reverse("pages:jobs") + "?cluster=²")
    assert response.status_code == 200
    assert response.context["cluster"] == min((demo, big), key=lambda c: c.name)
