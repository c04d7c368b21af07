"""The jobs page at scale: one page of 50 jobs whatever the cluster holds, filtered on the server
(status, namespace, name) and swapped over HTMX; the session and comparison forms at the top take every
schedulable job of the cluster, the schedulable ones matching the filter, or ones picked on the page.
Sizes and query counts are asserted, not wall time (that is benchmarks/web_scale.py's)."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from numaweb.comparisons.models import Comparison
from numaweb.jobs import lifecycle
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job, Task
from numaweb.scheduling.models import SchedulingSession
from tests.pages.test_comparisons import form_data

pytestmark = pytest.mark.django_db

PAGE_LIMIT = 200 * 1024  # the bound on the jobs page, in bytes


def add_jobs(cluster, count: int, namespace: str = "bulk") -> None:
    """`count` single-task jobs in one bulk insert (the demo's first task as their template)."""
    template = Task.objects.filter(job__cluster=cluster).first().template
    start = Job.objects.filter(cluster=cluster, namespace=namespace).count()
    jobs = Job.objects.bulk_create(Job(cluster=cluster, namespace=namespace, name=f"bulk-{i:05d}")
                                   for i in range(start, start + count))
    Task.objects.bulk_create(Task(job=j, name="main", replicas=1, template=template) for j in jobs)


def get_page(client, cluster, **query):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("pages:jobs"), {"cluster": cluster.pk, **query})
    assert response.status_code == 200
    return response.content.decode(), len(queries)


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', html)


def test_the_page_shows_one_page_of_jobs_in_bounded_size_and_queries(client, demo):
    add_jobs(demo, 60)
    small, small_queries = get_page(client, demo)
    add_jobs(demo, 1500)
    large, large_queries = get_page(client, demo)
    total = Job.objects.filter(cluster=demo).count()
    assert len(rows(large)) == 50 and f'data-total="{total}"' in large
    assert large_queries == small_queries  # the same fixed set of queries at 65 and 1,565 jobs
    assert len(large.encode()) <= PAGE_LIMIT
    assert abs(len(large) - len(small)) < 1024  # only the digits of ids and counts differ
    assert large.count('type="checkbox" name="jobs"') == 50 and large.count('name="cmp-jobs"') == 50
    newest = Job.objects.filter(cluster=demo).order_by("-id").values_list("name", flat=True)
    assert rows(large) == list(newest[:50])
    last = get_page(client, demo, page=32)[0]
    assert rows(last) == list(newest[1550:])


def test_filters_run_on_the_server_and_swap_only_the_list(client, demo):
    add_jobs(demo, 70)
    html, _ = get_page(client, demo, namespace="bulk", q="-0006")
    assert sorted(rows(html)) == [f"bulk-{i:05d}" for i in range(60, 70)]
    html, _ = get_page(client, demo, status="finished")
    assert rows(html) == [] and "No job matches the filter." in html
    lifecycle.finish_job(Job.objects.get(cluster=demo, name="bulk-00003"))
    assert rows(get_page(client, demo, status="finished")[0]) == ["bulk-00003"]
    fragment = client.get(reverse("pages:jobs"), {"cluster": demo.pk, "q": "BULK-0000"},
                          headers={"HX-Request": "true", "HX-Target": "job-list"}).content.decode()
    assert fragment.startswith('<div id="job-list">') and "<html" not in fragment
    assert sorted(rows(fragment)) == [f"bulk-{i:05d}" for i in range(10)]
    # the filter travels with both forms, for "the jobs matching the filter"
    assert '<input type="hidden" name="q" value="BULK-0000" form="session-form">' in fragment
    assert '<input type="hidden" name="cmp-q" value="BULK-0000" form="compare-form">' in fragment
    bad, _ = get_page(client, demo, status="nonsense")  # an invalid filter value filters nothing
    assert len(rows(bad)) == 50 and "nonsense is not one of the available choices" in bad


def _start(client, cluster, **data):
    return client.post(reverse("pages:session-start"), {"cluster": cluster.pk, "profile": "volcano",
                                                         "dry_run": "on", **data})


def _session_jobs() -> set[int]:
    return set(SchedulingSession.objects.latest("pk").jobs.values_list("pk", flat=True))


def test_a_session_takes_every_schedulable_job_the_filtered_ones_or_the_picked_ones(client, demo):
    add_jobs(demo, 30)
    finished = Job.objects.get(cluster=demo, name="bulk-00001")
    lifecycle.finish_job(finished)
    everything = {j.pk for j in job_services.schedulable_jobs(demo)}
    assert finished.pk not in everything
    assert _start(client, demo).status_code == 302  # the default: one click
    assert _session_jobs() == everything
    assert _start(client, demo, scope="all").status_code == 302
    assert _session_jobs() == everything
    assert _start(client, demo, scope="filter", namespace="bulk", q="bulk-0000").status_code == 302
    assert _session_jobs() == set(Job.objects.filter(cluster=demo, name__startswith="bulk-0000")
                                  .exclude(pk=finished.pk).values_list("pk", flat=True))
    picked = list(Job.objects.filter(cluster=demo, name__in=["bulk-00004", "bulk-00007"]).values_list("pk", flat=True))
    assert _start(client, demo, scope="picked", jobs=picked).status_code == 302
    assert _session_jobs() == set(picked)


def test_a_scope_that_chooses_nothing_is_refused_on_the_form(client, demo):
    count = SchedulingSession.objects.count()
    none = _start(client, demo, scope="picked")
    assert none.status_code == 422 and "no job is picked" in none.content.decode()
    empty = _start(client, demo, scope="filter", q="no-such-job")
    assert empty.status_code == 422
    assert "no schedulable job of cluster demo matches the filter (q=no-such-job)" in empty.content.decode()
    ignored = _start(client, demo, scope="all", jobs=[Job.objects.filter(cluster=demo).first().pk])
    assert ignored.status_code == 422 and "1 job is picked" in ignored.content.decode()
    assert SchedulingSession.objects.count() == count


def test_a_comparison_takes_the_filtered_or_picked_jobs(client, demo):
    add_jobs(demo, 12)
    response = client.post(reverse("comparisons:start"), form_data(demo, scope="filter", namespace="bulk"))
    assert response.status_code == 302, response.content[:500]
    expected = set(Job.objects.filter(cluster=demo, namespace="bulk").values_list("pk", flat=True))
    assert set(Comparison.objects.latest("pk").jobs.values_list("pk", flat=True)) == expected
    picked = [Job.objects.get(cluster=demo, name="bulk-00002").pk]
    response = client.post(reverse("comparisons:start"), form_data(demo, scope="picked", jobs=picked))
    assert response.status_code == 302
    assert list(Comparison.objects.latest("pk").jobs.values_list("pk", flat=True)) == picked
