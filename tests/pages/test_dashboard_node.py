"""Dashboard and node page through the test client: every demo node, the grid's cells against the
engine's topology, owners and reserved CPUs, the what-if box against the engine's admission."""

import re

import pytest
from django.urls import reverse

from numaweb.inventory import services as inventory
from numaweb.inventory.demo import SEED_ALLOCATIONS
from numaweb.inventory.models import Node
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.pods import Container, Pod
from tests.pages.helpers import grid_cells, parse

pytestmark = pytest.mark.django_db


def test_dashboard_lists_every_node_with_a_numa_usage_strip(client, demo):
    response = client.get(reverse("home"))
    assert response.status_code == 200
    cards = [a for tag, a in parse(response.content).elements if tag == "li" and "data-node-id" in a]
    nodes = {n.name: n for n in Node.objects.all()}
    assert sorted(a["data-node"] for a in cards) == sorted(nodes)
    html = response.content.decode()
    for card in cards:
        node = nodes[card["data-node"]]
        state = inventory.to_engine(node, node.allocations.all())
        assert int(card["data-free"]) == state.free_cpus.bit_count()
        start = html.index(f'data-node-id="{node.pk}"')
        end = html.find("</li>", start)
        bars = [a for tag, a in parse(html[start:end]).elements if tag == "svg" and "data-total" in a]
        reserved = state.reserved_cpus.mask
        expected = {n: ((m & state.free_cpus).bit_count(), m.bit_count(), (m & reserved).bit_count())
                    for n, m in state.topology.numa_cpus.items()}
        assert {int(b["data-numa"]): (int(b["data-free"]), int(b["data-total"]), int(b["data-reserved"]))
                for b in bars} == expected
        assert [f"N{n}" for n in sorted(expected)] == re.findall(r'class="numa-lbl"[^>]*>(N\d+)<', html[start:end])
        assert not parse(html[start:end]).cells  # the thread grid is on the node page, not on the card
    assert "imported" in html and "ago" in html  # freshness
    # the legend is drawn with the strips' own classes: free (background), used, reserved
    legend = html[html.index('class="legend-strip"'):]
    legend = legend[:legend.index("</p>")]
    assert re.findall(r'<rect class="(\w*)"', legend) == ["", "used", "reserved"]
    assert {"used", "reserved"} <= set(re.findall(r'<rect class="(\w+)"', html[html.index('class="cards"'):]))


def test_dashboard_filters_by_policy_and_free_capacity(client, demo):
    response = client.get(reverse("home"), {"policy": "best-effort"}, headers={"HX-Request": "true",
                                                                               "HX-Target": "node-list"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="node-list"')  # the fragment only
    shown = {a["data-node"] for tag, a in parse(html).elements if tag == "li" and "data-node-id" in a}
    assert shown == set(Node.objects.filter(topology_manager_policy="best-effort").values_list("name", flat=True))
    big = client.get(reverse("home"), {"min_numa_free": 20}).content.decode()
    shown = {a["data-node"] for tag, a in parse(big).elements if tag == "li" and "data-node-id" in a}
    assert "node-3" in shown and "node-1" not in shown and "node-2" not in shown


@pytest.mark.parametrize("name", ["srv-gpu-1", "xml-96em64t", "srv-big-1"])
def test_node_grid_has_one_cell_per_thread_with_engine_attributes(client, demo, name):
    node = Node.objects.get(name=name)
    response = client.get(reverse("pages:node", args=[node.pk]))
    assert response.status_code == 200
    cells = grid_cells(response.content, "grid")
    engine = inventory.to_engine(node, node.allocations.all())
    topo = engine.topology
    assert len(cells) == len(topo.cpus)
    assert sorted(int(c["data-cpu"]) for c in cells) == sorted(topo.cpu_info)
    owner_of = {}
    for a in node.allocations.all():
        for cpu in CPUSet.parse(a.cpus):
            owner_of[cpu] = a.pod
    for c in cells:
        cpu = topo.cpu_info[int(c["data-cpu"])]
        assert (int(c["data-core"]), int(c["data-numa"]), int(c["data-socket"])) == (cpu.core, cpu.numa, cpu.socket)
        assert c["data-owner"] == owner_of.get(cpu.id, "")
        expected = ("reserved" if cpu.id in engine.reserved_cpus else "used" if cpu.id in owner_of else "free")
        assert c["data-state"] == expected


def test_node_page_marks_reserved_and_seed_owners(client, demo):
    node = Node.objects.get(name="srv-gpu-1")
    html = client.get(reverse("pages:node", args=[node.pk])).content.decode()
    cells = {int(c["data-cpu"]): c for c in grid_cells(html, "grid")}
    assert cells[0]["data-state"] == cells[32]["data-state"] == "reserved"
    for node_name, pod, container, count in SEED_ALLOCATIONS:
        assert node_name == "srv-gpu-1"
        cpus = node.allocations.get(pod=pod, container=container).cpus
        assert {cells[c]["data-owner"] for c in CPUSet.parse(cpus)} == {pod} and len(CPUSet.parse(cpus)) == count
    assert html.count('<tr data-owner="') == 2  # legend: the two seed pods
    assert "NUMA distances" in html and "Kubelet settings" in html and "nvidia.com/gpu" in html


def test_cpu_detail_fragment(client, demo):
    node = Node.objects.get(name="srv-gpu-1")
    html = client.get(reverse("pages:node-cpu", args=[node.pk]), {"cpu": 3},
                      headers={"HX-Request": "true"}).content.decode()
    assert 'data-cpu="3"' in html and SEED_ALLOCATIONS[0][1] in html
    assert client.get(reverse("pages:node-cpu", args=[node.pk]), {"cpu": 999}).status_code == 400


def _engine_admit(node: Node, cpus: int, memory: int):
    engine = inventory.to_engine(node, node.allocations.all())
    pod = Pod("what-if", (Container.guaranteed("what-if", cpus * 1000, memory),))
    return admit_pod(engine, pod, commit=False)


def test_whatif_shows_hints_and_highlights_the_engines_cpus(client, demo):
    node = Node.objects.get(name="node-2")
    response = client.post(reverse("pages:node-whatif", args=[node.pk]),
                           {"cpu": "4", "memory": "4Gi", "guaranteed": "on"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-admitted="true"' in html and "merged best hint" in html
    expected = _engine_admit(node, 4, 4 * 2**30)
    assert expected.admitted
    lit = [int(c["data-cpu"]) for c in grid_cells(html, "grid") if c.get("data-highlight") == "1"]
    assert sorted(lit) == list(expected.cpus) and len(lit) == 4
    assert 'hx-swap-oob="true"' in html
    assert "{01: T}" in html  # NUMA 0 alone, in the seeds' notation
    assert html.index('class="hint-key"') < html.index("whatif-hints")  # the notation's key beside the table
    assert node.allocations.count() == 0  # commit=False: nothing held


def test_whatif_rejection_names_the_kubelet_reason(client, demo):
    node = Node.objects.get(name="node-1")  # single-numa-node, 16 CPUs per NUMA node
    html = client.post(reverse("pages:node-whatif", args=[node.pk]), {"cpu": "20", "memory": "1Gi", "guaranteed": "on"},
                       headers={"HX-Request": "true"}).content.decode()
    assert not _engine_admit(node, 20, 2**30).admitted
    assert 'data-admitted="false"' in html and "TopologyAffinityError" in html
    assert 'data-highlight="1"' not in html


def test_whatif_bad_quantity_is_an_inline_error(client, demo):
    node = Node.objects.get(name="node-1")
    html = client.post(reverse("pages:node-whatif", args=[node.pk]), {"cpu": "lots"},
                       headers={"HX-Request": "true"}).content.decode()
    assert 'data-field="cpu"' in html and "is not a quantity" in html


def test_dashboard_aggregates_and_usage_cached_per_generation(client, demo):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from numaweb.inventory.models import Allocation
    from numaweb.pages import usage

    usage._CACHE.clear()
    html = client.get(reverse("home")).content.decode()
    engines = {n.pk: inventory.to_engine(n, n.allocations.all()) for n in Node.objects.all()}
    sizes: dict[int, list[int]] = {}
    for e in engines.values():
        for m in e.topology.numa_cpus.values():
            sizes.setdefault(m.bit_count(), []).append((m & e.free_cpus).bit_count())
    rows = {int(a["data-numa-size"]): a for tag, a in parse(html).elements if tag == "tr" and "data-numa-size" in a}
    assert sorted(rows) == sorted(sizes)
    for size, frees in sizes.items():
        assert f'<tr data-numa-size="{size}"><th scope="row">{size}</th><td>{len(frees)}</td><td data-free>' \
               f'{sum(frees)}/{size * len(frees)}</td>' in html
    for policy in set(Node.objects.values_list("topology_manager_policy", flat=True)):
        n = Node.objects.filter(topology_manager_policy=policy).count()
        assert f'<span class="badge pol-{policy}">{policy}</span></th><td>{n}</td>' in html
    with CaptureQueriesContext(connection) as ctx:  # nothing changed: no allocation is read again
        client.get(reverse("home"), {"min_free": 1})
    assert not [q for q in ctx.captured_queries if '"inventory_allocation"' in q["sql"]]
    node = Node.objects.get(name="node-1")
    before = engines[node.pk].free_cpus.bit_count()
    from numaweb.inventory import services

    services.add_allocation(node, pod="default/new", container="c", cpus="4-7", origin=Allocation.IMPORTED)
    html = client.get(reverse("home")).content.decode()
    card = next(a for tag, a in parse(html).elements if tag == "li" and a.get("data-node") == "node-1")
    assert int(card["data-free"]) == before - 4  # the generation moved: recomputed


def test_dashboard_card_of_a_node_the_engine_refuses_says_why(client, demo):
    """A stored document the engine cannot read costs that node its strip, not the dashboard."""
    from numaweb.pages import usage

    usage._CACHE.clear()
    broken = Node.objects.get(name="node-1")
    Node.objects.filter(pk=broken.pk).update(topology={"kind": "numaweb.topology"}, fingerprint="broken",
                                             generation=broken.generation + 1)
    html = client.get(reverse("home")).content.decode()
    start = html.index(f'data-node-id="{broken.pk}"')
    card = html[start:html.find("</li>", start)]
    assert '<p class="error">' in card and "numa-bar" not in card
    cards = [a for tag, a in parse(html).elements if tag == "li" and "data-node-id" in a]
    others = [a for a in cards if a["data-node"] != "node-1"]
    assert others and all(int(a["data-free"]) > 0 for a in others)


def test_dashboard_numbers_follow_a_node_edit(client, demo):
    """Issue 31: the dashboard keeps its usage and aggregates per node version (generation, `updated_at` read as
    text) and reuses the last answer while every version is the same; an edit that moves only `updated_at`
    (no allocation written, the generation unchanged) still changes the numbers at once, as does one through
    the API (which moves both)."""
    from datetime import timedelta

    from django.utils import timezone

    from numaweb.pages import usage
    from numaweb.pages.views import dashboard

    usage._CACHE.clear()
    dashboard._SUMMARIES.clear()

    def numbers() -> tuple[int, str]:
        html = client.get(reverse("home")).content.decode()
        card = next(a for tag, a in parse(html).elements if tag == "li" and a.get("data-node") == "node-1")
        return int(card["data-free"]), re.findall(r"<td data-free>([0-9/]+)</td>", html)

    node = Node.objects.get(name="node-1")
    before, sizes = numbers()
    assert numbers() == (before, sizes)  # the same versions: the same answer
    free = inventory.to_engine(node, node.allocations.all()).free_cpus  # a mask
    four = CPUSet(sum(1 << c for c in [c for c in range(free.bit_length()) if free >> c & 1][:4]))
    Node.objects.filter(pk=node.pk).update(reserved_cpus=str(four), updated_at=timezone.now() + timedelta(seconds=1))
    assert Node.objects.get(pk=node.pk).generation == node.generation  # only updated_at moved
    after, sizes_after = numbers()
    assert after == before - 4 and sizes_after != sizes
    response = client.patch(f"/api/nodes/{node.pk}/", {"reserved_cpus": ""}, content_type="application/json")
    assert response.status_code == 200
    assert numbers() == (before, sizes)
