"""Names from users render as text everywhere; every form carries a CSRF token and a POST without
one is refused."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db

EVIL = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'


def _assert_text_only(html: str, shown: bool = True) -> None:
    assert "<script>alert" not in html and "<img src=x" not in html and "onerror=\"alert" not in html
    assert not shown or "&lt;script&gt;alert(1)&lt;/script&gt;" in html or "&lt;img src=x" in html


def test_script_names_render_as_text_on_every_page(client):
    cluster = Cluster.objects.create(name="evil")
    node = make_node(cluster, EVIL, shape=(2, 1, 4, 1), policy="best-effort")
    inventory.add_allocation(node, pod=f"default/{IMG}", container=EVIL, cpus="0-1")
    response = client.post(reverse("pages:jobs"), {"name": EVIL, "namespace": "default", "task": IMG,
                                                   "replicas": "1", "cpu": "1", "memory": "1Gi",
                                                   "topology_policy": "best-effort", "guaranteed": "on"})
    # Kubernetes names are refused at submission, and the error shows the name as text
    assert response.status_code == 422 and "is not a valid name" in response.content.decode()
    _assert_text_only(response.content.decode())
    # a row stored before names were checked still renders as text everywhere
    job = job_services.save_job(job_services.engine_job_from_data({
        "name": EVIL, "tasks": [{"name": IMG, "topology_policy": "best-effort", "template": {"containers": [
            {"name": "c", "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}]}}]}),
        cluster)
    session = services.start_session(cluster, "aligned", False, [job])
    session = services.execute_session(session.pk)
    assert session.status == "done" and session.pods_placed == 1
    pages = [reverse("home"), reverse("pages:node", args=[node.pk]), reverse("pages:jobs"),
             reverse("pages:job", args=[job.pk]), reverse("pages:session", args=[session.pk])]
    for url in pages:
        html = client.get(url).content.decode()
        _assert_text_only(html)
    _assert_text_only(client.get(reverse("pages:sessions")).content.decode(), shown=False)
    cpu = client.get(reverse("pages:node-cpu", args=[node.pk]), {"cpu": 0}).content.decode()
    _assert_text_only(cpu)
    whatif = client.post(reverse("pages:node-whatif", args=[node.pk]),
                         {"manifest": f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: '{EVIL}'\nspec:\n  containers:\n"
                                      f"  - name: '{IMG}'\n    resources:\n      requests: {{cpu: '1', memory: 1Gi}}\n"
                                      "      limits: {cpu: '1', memory: 1Gi}\n"},
                         headers={"HX-Request": "true"}).content.decode()
    _assert_text_only(whatif)
    # data attributes carry the escaped owner name too
    assert 'data-owner="default/&lt;img src=x onerror=&quot;alert(2)&quot;&gt;"' in client.get(
        reverse("pages:node", args=[node.pk])).content.decode()


def test_forms_carry_csrf_and_posts_without_it_are_refused(demo, make_user):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("pat", "admin"))
    node = Node.objects.get(name="node-2")
    for url in (reverse("pages:jobs"), reverse("pages:node", args=[node.pk])):
        html = strict.get(url).content.decode()
        forms = re.findall(r"<form\b[^>]*method=\"post\"", html)
        assert forms and html.count('name="csrfmiddlewaretoken"') == len(forms)
        assert "hx-headers='{\"X-CSRFToken\": \"" in html
    refused = [
        strict.post(reverse("pages:jobs"), {"name": "x", "cpu": "1"}),
        strict.post(reverse("pages:session-start"), {"cluster": demo.pk, "profile": "volcano"}),
        strict.post(reverse("pages:node-whatif", args=[node.pk]), {"cpu": "1"}, headers={"HX-Request": "true"}),
    ]
    assert [r.status_code for r in refused] == [403, 403, 403]
    assert not Job.objects.filter(name="x").exists()
    token = strict.cookies["csrftoken"].value
    ok = strict.post(reverse("pages:node-whatif", args=[node.pk]), {"cpu": "1"},
                     headers={"HX-Request": "true", "X-CSRFToken": token})
    assert ok.status_code == 200
    assert Allocation.objects.filter(node=node).count() == 0
