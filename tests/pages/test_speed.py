"""Big pages stay cheap by construction: a 512-thread node page and a session page whose hint table
has 1,000 node rows (paginated) are built from a fixed number of queries and render only one page of
rows. Their times are printed (pytest -s); the targets live in benchmarks/ (web_scale.py), not here,
because a shared machine makes wall-clock asserts flaky."""

import functools
import statistics
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import scheduler_core.scheduler.session as engine_session
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Cluster, Node
from numaweb.scheduling import services
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.topology import synthetic
from tests.pages.helpers import grid_cells
from tests.web.helpers import make_job

pytestmark = pytest.mark.django_db

GiB = 2**30
QUERY_BUDGET = 25  # a page's fixed set of queries (session, user, groups, banner, rows...), never one per row


def timed(client, url, params=None, runs=7) -> tuple[float, int, bytes]:
    """Median wall time of `runs` GETs after one warm-up (template and topology caches filled), and the
    number of SQL queries of the last one."""
    response = client.get(url, params or {})
    assert response.status_code == 200
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url, params or {})
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), len(queries), response.content


def test_512_thread_node_page_queries_do_not_grow_with_owners(client):
    cluster = Cluster.objects.create(name="big")
    node = Node(cluster=cluster, name="huge")
    inventory.set_topology(node, synthetic(2, 4, 32, 2, memory_per_numa=256 * GiB), "synthetic")
    inventory.set_kubelet(node, KubeletConfig.from_dict({"cpu_manager_policy": "static", "reserved_cpus": "0,256",
                                                         "topology_manager_policy": "restricted"}))
    node.save()
    for i in range(40):  # 40 pods holding 6 CPUs each
        start = 8 + i * 6
        inventory.add_allocation(node, pod=f"default/pod-{i}", container="c", cpus=f"{start}-{start + 5}")
    ms, queries, html = timed(client, reverse("pages:node", args=[node.pk]))
    print(f"\nnode page, 512 threads, 40 owners: {ms:.1f} ms (median of 7), {queries} queries")
    assert len(grid_cells(html, "grid")) == 512
    assert len({cell["data-owner"] for cell in grid_cells(html, "grid") if cell.get("data-owner")}) == 40
    assert queries <= QUERY_BUDGET, f"{queries} queries: the node page should not query per owner or per CPU"


def test_session_page_with_1000_node_rows_renders_one_page(client, monkeypatch):
    cluster = Cluster.objects.create(name="thousand")
    shapes = [((2, 1, 8, 2), "best-effort"), ((2, 2, 4, 2), "single-numa-node"), ((1, 1, 16, 2), "restricted"),
              ((2, 1, 12, 1), "none")]
    rows = []
    for i in range(1000):
        shape, policy = shapes[i % len(shapes)]
        node = Node(cluster=cluster, name=f"n{i:04d}")
        inventory.set_topology(node, synthetic(*shape, memory_per_numa=64 * GiB), "synthetic")
        inventory.set_kubelet(node, KubeletConfig.from_dict({"cpu_manager_policy": "static",
                                                             "topology_manager_policy": policy}))
        rows.append(node)
    Node.objects.bulk_create(rows)
    job = make_job("wide", cpus="12", policy="best-effort")
    # keep every node's name in the record (the default lists 10 per class) so 1,000 rows can be shown
    monkeypatch.setattr(services, "run_session", functools.partial(engine_session.run_session, explain_names=1000))
    session = services.start_session(cluster, "volcano", True, [job])
    session = services.execute_session(session.pk)
    assert session.status == "done" and session.nodes_total == 1000
    url = reverse("pages:session", args=[session.pk])
    ms, queries, html = timed(client, url, {"expand": "1"})
    text = html.decode()
    assert 'data-rows="1000"' in text and text.count('class="hint-row') == 50
    fragment_ms, fragment_queries, page20 = timed(client, reverse("pages:session-hints", args=[session.pk, 0]),
                                {"expand": "1", "page": 20, "sort": "name"})
    assert page20.decode().count('class="hint-row') == 50
    print(f"\nsession page, 1000 node rows (50 per page): {ms:.1f} ms; hint table page 20 sorted: "
          f"{fragment_ms:.1f} ms (medians of 7); {queries} and {fragment_queries} queries")
    assert queries <= QUERY_BUDGET and fragment_queries <= QUERY_BUDGET, (queries, fragment_queries)
