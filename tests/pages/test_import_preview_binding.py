"""The import page's confirmation is bound to its preview (issue 37 row 12): another admin confirmed someone's
preview into another cluster, and a prune added at confirmation removed 3,000 nodes the preview never showed.
Now a confirmation by another user, for another cluster or with other options is refused, changing nothing."""

import pytest
from django.test import Client
from django.urls import reverse

from numaweb.inventory.models import Cluster, Node
from tests.pages.test_snapshot_pages import UPSTREAM, _upload
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db
URL = reverse("pages:cluster-import")


def _preview(client, **options) -> str:
    html = client.post(URL, {"cluster": "prod", "file": _upload(UPSTREAM), **options}).content.decode()
    assert "Nothing has been changed yet" in html
    return html.split('name="upload" value="')[1].split('"')[0]


@pytest.fixture
def prod():
    """A cluster whose one node the snapshot does not list: a prune would remove it."""
    cluster = Cluster.objects.create(name="prod")
    make_node(cluster, "not-in-the-snapshot")
    return cluster


def test_a_prune_added_at_confirmation_is_refused(client, prod):
    token = _preview(client)
    refused = client.post(URL, {"cluster": "prod", "upload": token, "prune": "on"})
    assert refused.status_code == 400
    assert "the preview was for prune False" in refused.content.decode()
    assert Node.objects.get(name="not-in-the-snapshot").removed_at is None
    assert not Node.objects.filter(name="node1").exists()  # nothing imported either
    done = client.post(URL, {"cluster": "prod", "upload": token})  # the preview's own options still confirm
    assert "Cluster prod: imported" in done.content.decode()
    assert Node.objects.get(name="not-in-the-snapshot").removed_at is None


def test_another_cluster_or_another_user_cannot_confirm_it(client, make_user, prod):
    token = _preview(client)
    other_cluster = client.post(URL, {"cluster": "staging", "upload": token})
    assert other_cluster.status_code == 400 and "the preview was for cluster &#x27;prod&#x27;" in \
        other_cluster.content.decode()
    assert not Cluster.objects.filter(name="staging").exists()
    colleague = Client()
    colleague.force_login(make_user("ada", "admin"))
    other_user = colleague.post(URL, {"cluster": "prod", "upload": token})
    assert other_user.status_code == 400 and "made by another user" in other_user.content.decode()
    assert not Node.objects.filter(name="node1").exists()


def test_a_previewed_prune_confirms(client, prod):
    token = _preview(client, prune="on")
    done = client.post(URL, {"cluster": "prod", "upload": token, "prune": "on"})
    assert "Cluster prod: imported" in done.content.decode()
    assert Node.objects.get(name="not-in-the-snapshot").removed_at is not None
