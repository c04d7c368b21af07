"""GET /api/jobs/ paged and filtered on the server like the jobs page (cluster, status, namespace, name),
a bad filter value a 400 naming the parameter, and the schema describing both."""

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from numaweb.inventory.demo import build_demo
from numaweb.jobs import lifecycle
from numaweb.jobs.models import Job
from tests.pages.test_jobs_at_scale import add_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db):
    return build_demo("demo")


def names(body: dict) -> list[str]:
    return [job["name"] for job in body["results"]]


def test_the_list_is_paged_and_filtered(api, demo):
    add_jobs(demo, 130)
    total = Job.objects.filter(cluster=demo).count()
    first = api.get("/api/jobs/", {"cluster": demo.pk}).json()
    assert first["count"] == total and len(first["results"]) == 100 and first["next"]
    small = api.get("/api/jobs/", {"cluster": demo.pk, "page_size": 20, "page": 2}).json()
    assert names(small) == list(Job.objects.filter(cluster=demo).order_by("id").values_list("name", flat=True)[20:40])
    body = api.get("/api/jobs/", {"cluster": demo.pk, "namespace": "bulk", "q": "BULK-0012"}).json()
    assert body["count"] == 10 and names(body) == [f"bulk-{i:05d}" for i in range(120, 130)]
    lifecycle.finish_job(Job.objects.get(cluster=demo, name="bulk-00005"))
    assert names(api.get("/api/jobs/", {"status": "finished"}).json()) == ["bulk-00005"]
    assert api.get("/api/jobs/", {"cluster": demo.pk, "namespace": "nowhere"}).json()["count"] == 0


def test_a_bad_filter_is_a_400_naming_it(api, demo):
    r = api.get("/api/jobs/", {"status": "running"})
    assert r.status_code == 400 and "running is not one of the available choices" in r.json()["status"][0]
    r = api.get("/api/jobs/", {"cluster": "x"})
    assert r.status_code == 400 and "cluster" in r.json()


def test_a_page_costs_the_same_queries_whatever_the_cluster_holds(api, demo):
    add_jobs(demo, 120)
    with CaptureQueriesContext(connection) as few:
        assert api.get("/api/jobs/", {"cluster": demo.pk}).status_code == 200
    add_jobs(demo, 1000)
    with CaptureQueriesContext(connection) as many:
        assert api.get("/api/jobs/", {"cluster": demo.pk}).status_code == 200
    assert len(many) == len(few)


def test_the_schema_describes_the_filters_and_the_paging(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    listing = schema["paths"]["/api/jobs/"]["get"]
    params = {p["name"]: p for p in listing["parameters"]}
    assert set(params) >= {"cluster", "status", "namespace", "q", "page", "page_size"}
    assert sorted(params["status"]["schema"]["enum"]) == sorted(Job.Status.values)
    ok = listing["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ok.endswith("/PaginatedJobList")
