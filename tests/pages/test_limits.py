"""Hostile sizes through the pages and the admin: an inline error naming the field, in under a second
and under 50 MiB; the what-if box builds one pod however many replicas a pasted job has."""

import pytest
from django.urls import reverse

from numaweb.inventory.models import Cluster, Node
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from tests.measure import MiB, measure

pytestmark = pytest.mark.django_db

JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: wide}}
spec:
  tasks:
  - name: t
    replicas: {replicas}
    template:
      spec:
        containers:
        - name: c
          resources:
            requests: {{cpu: "1", memory: 1Gi}}
            limits: {{cpu: "1", memory: 1Gi}}
"""


@pytest.fixture(autouse=True)
def warm(client):
    """A server that has answered once (templates compiled, URLs resolved): what the timings are about."""
    client.post(reverse("pages:jobs"), {"name": "warm-up"})


def refused(call, status=422):
    m = measure(call)
    assert m.result.status_code == status, m.result.content[:300]
    assert m.seconds < 1 and m.growth < 50 * MiB, (m.seconds, m.growth)
    return m.result.content.decode()


def field_errors(html: str, field: str) -> str:
    start = html.index(f'data-field="{field}"')
    return html[start:html.index("</div>\n", start)]


@pytest.mark.parametrize(("data", "field", "needle"), [
    ({"replicas": str(10**20)}, "replicas", "less than or equal to 2147483647"),
    ({"replicas": "10001"}, "replicas", "more than the limit of 10000 replicas per task"),
    ({"min_available": str(10**30)}, "min_available", "less than or equal to 2147483647"),
    ({"min_available": "5"}, "min_available", "minAvailable (5) is more than its 1 replicas"),
    ({"name": "x" * 5000}, "name", "at most 253 characters"),
    ({"namespace": "Bad_NS"}, "namespace", "is not a valid name"),
])
def test_job_form_bounds(client, data, field, needle):
    form = {"name": "ok", "namespace": "default", "task": "main", "replicas": "1", "cpu": "1", "memory": "1Gi",
            "guaranteed": "on", **data}
    html = refused(lambda: client.post(reverse("pages:jobs"), form))
    assert needle in field_errors(html, field), field_errors(html, field)
    assert not Job.objects.exists()


def test_job_manifest_bounds(client):
    html = refused(lambda: client.post(reverse("pages:jobs"), {"manifest": JOB.format(replicas=10**9)}))
    assert "spec.tasks[0].replicas: 1000000000 is more than the limit" in field_errors(html, "manifest")


def test_whatif_builds_one_pod(client, demo):
    node = Node.objects.get(name="node-2")
    # the limit refuses a 10^7-replica job at once...
    html = refused(lambda: client.post(reverse("pages:node-whatif", args=[node.pk]),
                                       {"manifest": JOB.format(replicas=10**7)}))
    assert "more than the limit of 10000 replicas per task" in html
    # ...and under a raised limit the box still builds only the first pod
    from django.test import override_settings

    with override_settings(NUMAWEB_MAX_REPLICAS_PER_TASK=10**7, NUMAWEB_MAX_PODS_PER_JOB=10**7):
        m = measure(lambda: client.post(reverse("pages:node-whatif", args=[node.pk]),
                                        {"manifest": JOB.format(replicas=10**7)}, headers={"HX-Request": "true"}))
    assert m.result.status_code == 200 and 'data-admitted="true"' in m.result.content.decode()
    assert m.seconds < 1 and m.growth < 50 * MiB, (m.seconds, m.growth)


def test_page_of_a_huge_legacy_job(client):
    """A job stored before the limits (10^6 replicas) still has a page: one page of pods, no 500."""
    template = {"containers": [{"name": "c", "requests": {"cpu": "1"}}]}
    engine = job_services.engine_job_from_data({"name": "legacy", "tasks": [{"name": "t", "replicas": 10**6,
                                                                            "template": template}]})
    job = job_services.save_job(engine, Cluster.objects.create(name="legacy"))
    m = measure(lambda: client.get(reverse("pages:job", args=[job.pk]) + "?page=20000"))
    assert m.result.status_code == 200 and 'data-pod="legacy-t-999999"' in m.result.content.decode()
    assert m.seconds < 1 and m.growth < 50 * MiB, (m.seconds, m.growth)


def test_admin_task_bounds(admin_client):
    job = job_services.save_job(job_services.engine_job_from_data({"name": "adm", "tasks": [{"name": "t",
                                "template": {"containers": [{"name": "c", "requests": {"cpu": "1"}}]}}]}),
                                Cluster.objects.create(name="adm"))
    task = job.tasks.get()
    url = f"/admin/jobs/job/{job.pk}/change/"
    form = {"name": "adm", "namespace": "default", "queue": "default", "priority": "0", "min_available": "",
            "source_format": "json", "manifest": "", "tasks-TOTAL_FORMS": "1", "tasks-INITIAL_FORMS": "1",
            "tasks-MIN_NUM_FORMS": "0", "tasks-MAX_NUM_FORMS": "1000", "tasks-0-id": str(task.pk),
            "tasks-0-job": str(job.pk), "tasks-0-name": "t", "tasks-0-replicas": "20000",
            "tasks-0-topology_policy": "",
            "tasks-0-template": '{"containers": [{"name": "c", "requests": {"cpu": 1000}}]}'}
    html = refused(lambda: admin_client.post(url, form), status=200)
    assert "more than the limit of 10000 replicas per task" in html
    html = admin_client.post(url, {**form, "tasks-0-replicas": "2", "priority": str(10**30)}).content.decode()
    assert "outside the 32-bit range" in html
    html = admin_client.post(url, {**form, "tasks-0-replicas": "2", "min_available": "3"}).content.decode()
    assert "minAvailable (3) is more than the job" in html
    assert job.tasks.get().replicas == 1
    assert admin_client.post(url, {**form, "tasks-0-replicas": "2"}).status_code == 302
    assert job.tasks.get().replicas == 2
