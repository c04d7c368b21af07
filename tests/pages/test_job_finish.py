"""The job page: its derived status, its pods a page at a time, and the button that finishes it and
releases what its pods hold."""

import pytest
from django.urls import reverse

from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from tests.web.helpers import make_job, make_node

pytestmark = pytest.mark.django_db


def test_finish_button_releases_the_allocations(client):
    cluster = Cluster.objects.create(name="fin")
    make_node(cluster, "n1", shape=(1, 1, 4, 1))
    job = make_job("fin", cpus="1", replicas=2)
    session = SchedulingSession.objects.create(cluster=cluster)
    session.jobs.set([job])
    services.execute_session(session.pk)
    html = client.get(reverse("pages:job", args=[job.pk])).content.decode()
    assert ">scheduled</span>" in html and "release its 2 allocations" in html
    response = client.post(reverse("pages:job-finish", args=[job.pk]))
    assert response.status_code == 302
    assert not Allocation.objects.exists() and Job.objects.get(pk=job.pk).status == "finished"
    html = client.get(reverse("pages:job", args=[job.pk])).content.decode()
    assert ">finished</span>" in html and "Finish job" not in html


def test_big_job_page_shows_one_page_of_pods(client):
    job = make_job("wide", cpus="1", replicas=10_000, cluster=Cluster.objects.create(name="wide"))
    html = client.get(reverse("pages:job", args=[job.pk]) + "?page=3").content.decode()
    assert 'data-pod="wide-t-100"' in html and 'data-pod="wide-t-149"' in html
    assert 'data-pod="wide-t-99"' not in html and 'data-pod="wide-t-150"' not in html
    assert "pods 101–150 of 10000" in html


def test_job_page_shows_the_templates_labels_annotations_and_pod_priority(client):
    from numaweb.jobs import services as job_services

    cluster = Cluster.objects.create(name="koord")
    res = {"cpu": "2", "memory": "1Gi"}
    template = {"containers": [{"name": "c", "requests": res, "limits": res}],
                "labels": {"koordinator.sh/qosClass": "LSR", "items": "<b>x</b>"},
                "annotations": {"scheduling.koordinator.sh/resource-spec": '{"requiredCPUBindPolicy": "FullPCPUs"}'},
                "priority": 9000}
    job = job_services.save_job(job_services.engine_job_from_data(
        {"name": "lsr", "tasks": [{"name": "t", "template": template}]}), cluster)
    html = client.get(reverse("pages:job", args=[job.pk])).content.decode()
    assert "<code>koordinator.sh/qosClass=LSR</code>" in html
    assert "<code>items=&lt;b&gt;x&lt;/b&gt;</code>" in html  # a key named items, the value escaped
    assert "scheduling.koordinator.sh/resource-spec={&quot;requiredCPUBindPolicy&quot;" in html
    assert "pod priority 9000" in html
    plain = make_job("plain", cluster=cluster)
    html = client.get(reverse("pages:job", args=[plain.pk])).content.decode()
    assert "pod-labels" not in html and "pod priority" not in html
