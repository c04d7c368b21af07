"""The audit trail: a change made through the API, a page, the admin site or a management command leaves
a history row saying who, when, what and from where; the node and job pages show it."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from numaweb.inventory.models import Cluster, Node
from numaweb.jobs.models import Job
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db


def latest(model, **filters):
    return model.history.filter(**filters).order_by("-history_date", "-history_id").first()


def test_api_changes_and_deletes_are_recorded(make_user):
    from tests.web.helpers import token_client

    user = make_user("alice", "admin")
    api = token_client(user)
    cluster = Cluster.objects.create(name="c1")
    node = make_node(cluster, "n1")
    r = api.patch(f"/api/nodes/{node.pk}/", {"topology_manager_policy": "restricted"}, format="json")
    assert r.status_code == 200, r.content
    row = latest(Node, id=node.pk)
    assert (row.history_type, row.history_source, row.history_user, row.history_username) == (
        "~", "api", user, "alice")
    assert "topology_manager_policy" in [c.field for c in row.diff_against(row.prev_record).changes]
    assert api.delete(f"/api/clusters/{cluster.pk}/").status_code == 204
    gone = latest(Cluster, id=cluster.pk)
    assert (gone.history_type, gone.history_source, gone.history_username) == ("-", "api", "alice")
    assert latest(Node, id=node.pk).history_type == "-"  # the cascade is recorded too


def test_a_job_submitted_on_the_page_is_recorded(operator_client):
    cluster = Cluster.objects.create(name="c")
    body = {"cluster": cluster.pk, "name": "j", "namespace": "default",
            "task": "main", "replicas": "1", "cpu": "1", "memory": "1Gi",
            "topology_policy": "best-effort", "guaranteed": "on"}
    assert operator_client.post(reverse("pages:jobs"), body).status_code == 302
    job = Job.objects.get(name="j")
    assert job.cluster == cluster
    row = latest(Job, id=job.pk)
    assert (row.history_type, row.history_source, row.history_username) == ("+", "page", "olga")
    page = operator_client.get(reverse("pages:job", args=[job.pk])).content.decode()
    assert 'data-history-source="page"' in page and "olga" in page


def test_an_admin_site_edit_is_recorded_and_shown_on_the_node_page(make_user, client):
    from django.test import Client

    cluster = Cluster.objects.create(name="c1")
    admin = Client()
    admin.force_login(make_user("root", "admin"))
    r = admin.post(f"/admin/inventory/cluster/{cluster.pk}/change/", {"name": "c1", "description": "rack 7"})
    assert r.status_code == 302, r.content.decode()[:3000]
    row = latest(Cluster, id=cluster.pk)
    assert (row.history_type, row.history_source, row.history_username) == ("~", "admin", "root")
    history = admin.get(f"/admin/inventory/cluster/{cluster.pk}/history/").content.decode()
    assert "root" in history and "admin" in history
    # no template comment leaks into the page (a {# #} comment spans one line only)
    assert "{#" not in history and "#}" not in history and "{% comment" not in history
    assert "allows no style attribute" not in history and 'id="change-history"' in history
    node = make_node(cluster, "n1")
    node_page = client.get(reverse("pages:node", args=[node.pk])).content.decode()
    assert 'data-history-source="command"' in node_page  # make_node ran outside any request


def test_a_command_change_is_recorded_with_the_os_user(tmp_path):
    import getpass

    out = io.StringIO()
    call_command("demo", stdout=out)
    row = latest(Cluster, name="demo")
    assert (row.history_type, row.history_source, row.history_user) == ("+", "command", None)
    assert row.history_username == getpass.getuser()
