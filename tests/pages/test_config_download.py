"""A node's config.yaml download with a hostile name (issue 37 row 12): a newline in the name made the
Content-Disposition header invalid (BadHeaderError, 500); a quote would have ended the file name early."""

import pytest
import yaml

from numaweb.inventory.models import Cluster, Node
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("name", "filename"), [("evil\nname", "evil_name-config.yaml"),
                                                ('a"b\r\nSet-Cookie: x=1', "a_b_Set-Cookie_x_1-config.yaml"),
                                                ("\n\n", None)])
def test_the_download_names_the_file_from_the_safe_characters(client, name, filename):
    node = make_node(Cluster.objects.create(name="c1"), "n1")
    Node.objects.filter(pk=node.pk).update(name=name)  # as an admin or a snapshot import could write it
    response = client.get(f"/nodes/{node.pk}/kubelet-config")
    assert response.status_code == 200
    expected = filename or f"node-{node.pk}-config.yaml"
    assert response["Content-Disposition"] == f'attachment; filename="{expected}"'
    assert "Set-Cookie" not in response.headers or "x=1" not in response["Set-Cookie"]
    assert yaml.safe_load(response.content)["kind"] == "KubeletConfiguration"
