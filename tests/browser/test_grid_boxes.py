"""The thread grid's boxes count what they hold, on machines whose NUMA nodes span packages: an EPYC
with 2 packages in 1 NUMA node (384 threads) and the 96-thread hwloc demo (16 packages, 4 NUMA nodes).
Packages nest inside NUMA nodes there, and every box's "free/total" equals the cells inside it."""

import re

import pytest
from playwright.sync_api import Page

from numaweb.inventory import services as inventory
from numaweb.inventory.demo import FIXTURES
from numaweb.inventory.models import Allocation, Cluster

pytestmark = pytest.mark.browser

BOXES = """grid => [...grid.querySelectorAll('.pkg, .numa')].map(b => ({
    kind: b.classList.contains('pkg') ? 'package' : 'numa', inner: b.classList.contains('inner'),
    id: +(b.dataset.socket ?? b.dataset.numa), label: b.querySelector(':scope > .lbl').textContent,
    cells: b.querySelectorAll('[data-cpu]').length,
    free: b.querySelectorAll('[data-state="free"]').length,
    sockets: [...new Set([...b.querySelectorAll('[data-cpu]')].map(c => +c.dataset.socket))],
    numas: [...new Set([...b.querySelectorAll('[data-cpu]')].map(c => +c.dataset.numa))]}))"""


@pytest.mark.parametrize(("file", "packages", "numa_nodes"), [
    ("AMD-19h-Zen4-2xEpyc-9654.xml", 2, 1), ("96em64t-4n4d3ca2co-pci.xml", 16, 4)])
def test_every_box_counts_the_cells_it_holds(page: Page, live_server, transactional_db, file, packages,
                                            numa_nodes):
    cluster = Cluster.objects.create(name="shapes")
    node = inventory.import_node(cluster, "box", (FIXTURES / file).read_bytes(), None,
                                 {"cpu_manager_policy": "static", "topology_manager_policy": "best-effort"})
    inventory.add_allocation(node, pod="default/holder", container="c", cpus="1-5", origin=Allocation.SCHEDULED)
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    boxes = page.locator("#grid").evaluate(BOXES)
    outer = [b for b in boxes if not b["inner"]]
    inner = [b for b in boxes if b["inner"]]
    # packages nest inside NUMA nodes here: one outer box per NUMA node, one inner box per package
    assert [b["kind"] for b in outer] == ["numa"] * numa_nodes
    assert sorted(b["id"] for b in inner if b["kind"] == "package") == list(range(packages))
    assert sum(b["cells"] for b in outer) == node.num_cpus
    for b in boxes:
        free, total = map(int, re.search(r"(\d+)/(\d+) free", b["label"]).groups())
        assert (free, total) == (b["free"], b["cells"]), b
        assert b["label"].startswith(f"{'Package' if b['kind'] == 'package' else 'NUMA'} {b['id']} ")
        assert (b["sockets"] if b["kind"] == "package" else b["numas"]) == [b["id"]]
    assert sum(b["free"] for b in outer) == node.num_cpus - 5
