"""Server time with the test client: a 512-thread node page under 150 ms and a session page whose
hint table has 1,000 node rows (paginated) under 300 ms. Figures are printed (pytest -s)."""

import functools
import statistics
import time

import pytest
from django.urls import reverse

import scheduler_core.session as engine_session
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Cluster, Node
from numaweb.scheduling import services
from scheduler_core.kubelet import KubeletConfig
from scheduler_core.topology import synthetic
from tests.pages.helpers import grid_cells
from tests.web.helpers import make_job

pytestmark = pytest.mark.django_db

GiB = 2**30


def timed(client, url, params=None, runs=7) -> tuple[float, bytes]:
    """Median wall time of `runs` GETs after one warm-up (template and topology caches filled)."""
    response = client.get(url, params or {})
    assert response.status_code == 200
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        response = client.get(url, params or {})
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), response.content


def test_512_thread_node_page_under_150_ms(client):
    cluster = Cluster.objects.create(name="big")
    node = Node(cluster=cluster, name="huge")
    inventory.set_topology(node, synthetic(2, 4, 32, 2, memory_per_numa=256 * GiB), "synthetic")
    inventory.set_kubelet(node, KubeletConfig.from_dict({"cpu_manager_policy": "static", "reserved_cpus": "0,256",
                                                         "topology_manager_policy": "restricted"}))
    node.save()
    for i in range(40):  # 40 pods holding 6 CPUs each
        start = 8 + i * 6
        inventory.add_allocation(node, pod=f"default/pod-{i}", container="c", cpus=f"{start}-{start + 5}")
    ms, html = timed(client, reverse("pages:node", args=[node.pk]))
    print(f"\nnode page, 512 threads, 40 owners: {ms:.1f} ms (median of 7)")
    assert len(grid_cells(html, "grid")) == 512
    assert ms < 150


def test_session_page_with_1000_node_rows_under_300_ms(client, monkeypatch):
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
    monkeypatch.setattr(engine_session, "run_session",
                        functools.partial(engine_session.run_session, explain_names=1000))
    session = services.start_session(cluster, "volcano", True, [job])
    session = services.execute_session(session.pk)
    assert session.status == "done" and session.nodes_total == 1000
    url = reverse("pages:session", args=[session.pk])
    ms, html = timed(client, url, {"expand": "1"})
    text = html.decode()
    assert 'data-rows="1000"' in text and text.count('class="hint-row') == 50
    fragment_ms, page20 = timed(client, reverse("pages:session-hints", args=[session.pk, 0]),
                                {"expand": "1", "page": 20, "sort": "name"})
    assert page20.decode().count('class="hint-row') == 50
    print(f"\nsession page, 1000 node rows (50 per page): {ms:.1f} ms; hint table page 20 sorted: "
          f"{fragment_ms:.1f} ms (medians of 7)")
    assert ms < 300 and fragment_ms < 300
