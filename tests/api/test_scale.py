"""A 1,000-node session: results are stored compactly (one row per pod, verdicts grouped by node
class) and a results page costs the same few queries whichever page it is (timings: benchmarks/web_scale.py)."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from numaweb.inventory import services
from numaweb.inventory.models import Node
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import Placement, SchedulingSession
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.topology import synthetic
from tests.web.helpers import GiB, make_job


def test_thousand_node_session_results_page(api, cluster):
    template = Node(cluster=cluster)
    services.set_topology(template, synthetic(2, 2, 8, 2, memory_per_numa=64 * GiB), "synthetic")
    rows = []
    for i in range(1000):
        node = Node(cluster=cluster, name=f"n{i:04d}", topology=template.topology, num_cpus=template.num_cpus,
                    num_numa_nodes=template.num_numa_nodes, num_sockets=template.num_sockets,
                    fingerprint=template.fingerprint, source_format="synthetic")
        policy = ("best-effort", "single-numa-node")[i % 2]
        services.set_kubelet(node, KubeletConfig.from_dict({"cpu_manager_policy": "static",
                                                            "topology_manager_policy": policy}))
        rows.append(node)
    Node.objects.bulk_create(rows)
    job = make_job("wide", cpus="4", replicas=300, policy="best-effort")
    session = SchedulingSession.objects.create(cluster=cluster)
    session.jobs.set([job])
    scheduling.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "done", session.error
    assert session.nodes_total == 1000 and session.pods_placed == 300
    assert Placement.objects.filter(session=session).count() == 300  # one row per pod, not per pod × node
    queries = []
    for page in (1, 3):
        with CaptureQueriesContext(connection) as ctx:
            r = api.get(f"/api/sessions/{session.pk}/results/?page_size=100&page={page}")
        assert r.status_code == 200 and len(r.json()["results"]) == 100
        queries.append(len(ctx.captured_queries))
    assert queries[0] == queries[1] <= 12, queries  # per table, not per pod
    groups = r.json()["results"][0]["detail"]["groups"]
    assert sum(g["node_count"] for g in groups) == 1000 and len(groups) < 10
