"""The cluster map: one mark per node, each carrying the measure chosen, computed here from the engine."""

import re

import pytest
from django.urls import reverse

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Node
from numaweb.jobs.models import Job
from numaweb.pages import cluster_map
from numaweb.scheduling import services
from tests.pages.helpers import map_data

pytestmark = pytest.mark.django_db


def _marks(html: str) -> dict[int, int]:
    """{node id: value} of every mark, each checked to sit in the bin its value falls in."""
    data = map_data(html)
    measure = re.search(r'<option value="(\w+)" selected>', html)
    out = {}
    for group in data["groups"]:
        assert len(group["ids"]) == len(group["names"]) == len(group["values"]) == len(group["bins"])
        for pk, value, mark in zip(group["ids"], group["values"], group["bins"], strict=True):
            assert int(mark) == cluster_map.bin_of(measure.group(1) if measure else "best", value)
            out[pk] = value
    return out


def _engine(node: Node):
    return inventory.to_engine(node, node.allocations.all())


def test_one_mark_per_node_with_its_best_numa_free_cpus_blocks_and_reserved(client, demo):
    url = reverse("pages:cluster-map", args=[demo.pk])
    nodes = {n.pk: _engine(n) for n in Node.objects.filter(cluster=demo)}
    best = _marks(client.get(url).content.decode())
    assert best == {pk: max(n.free_cpus_per_numa().values()) for pk, n in nodes.items()}
    blocks = _marks(client.get(url, {"measure": "blocks", "size": "4"}).content.decode())
    assert blocks == {pk: sum(free // 4 for free in n.free_cpus_per_numa().values()) for pk, n in nodes.items()}
    reserved = _marks(client.get(url, {"measure": "reserved"}).content.decode())
    assert reserved == {pk: n.reserved_cpus.mask.bit_count() for pk, n in nodes.items()}
    assert any(reserved.values())
    home = client.get(reverse("home")).content.decode()
    assert f'href="{url}"' in home


def test_topology_affinity_errors_of_a_session(client, demo):
    url = reverse("pages:cluster-map", args=[demo.pk])
    missing = client.get(url, {"measure": "errors"})
    assert missing.status_code == 400 and "choose the session" in missing.content.decode()
    session = services.start_session(demo, "unaware", True, list(Job.objects.all()))
    services.execute_session(session.pk)
    errors = _marks(client.get(url, {"measure": "errors", "session": session.pk}).content.decode())
    expected = {pk: 0 for pk in Node.objects.filter(cluster=demo).values_list("pk", flat=True)}
    for p in session.placements.filter(kubelet_reason="TopologyAffinityError"):
        expected[p.node_id] += 1
    assert errors == expected and any(expected.values())
    assert client.get(url, {"measure": "blocks", "size": "0"}).status_code == 400
