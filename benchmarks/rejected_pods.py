"""Rejected pods at scale: a generated snapshot of N nodes (benchmarks.snapshot_import's nodes: 128 CPUs,
4 NUMA nodes, single-numa-node, 4 running pods each) plus `--rejected` pods the kubelet rejected with
TopologyAffinityError, imported with `import_snapshot` into a scratch SQLite database; then the pages
and API calls that show them are timed (fastest and median of `--repeat` calls).

    python -m benchmarks.rejected_pods [--nodes 5000] [--rejected 500] [--repeat 5]

Half the rejected pods ask for 30 CPUs (one NUMA node has 32: other nodes admit them now), half for 40
(no NUMA node has that many: explained, no node admits them, make room is searched within the import's
budget for it and finds nothing, no setting but a looser policy admits them)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def snapshot(nodes: int, rejected: int) -> str:
    from benchmarks.snapshot_import import generated_snapshot

    doc = json.loads(generated_snapshot(nodes, 4, as_json=True))
    step = max(1, nodes // max(1, rejected))
    for k in range(rejected):
        node = f"node-{(k * step) % nodes:05d}"
        cpus = 30 if k % 2 == 0 else 40
        doc["items"].append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"rejected-{k:04d}", "namespace": "ml", "uid": f"uid-rejected-{k}",
                         "creationTimestamp": "2026-11-21T00:00:00Z"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox", "resources": {
                "limits": {"cpu": str(cpus), "memory": "8Gi"}}}]},
            "status": {"phase": "Failed", "reason": "TopologyAffinityError", "qosClass": "Guaranteed",
                       "message": "Pod was rejected: Resources cannot be allocated with Topology locality",
                       "startTime": "2026-11-21T00:00:01Z"}})
    return json.dumps(doc)


def _timed(call, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rejected", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DATABASE_PATH"] = f"{tmp}/bench.sqlite3"
        os.environ["STATIC_ROOT"] = f"{tmp}/static"
        os.environ.pop("DATABASE_URL", None)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
        sys.path.insert(0, str(ROOT))
        import django

        from numaweb.startup import prepare

        prepare()  # the data folder, queue folder and secret key (settings never write)
        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        from numaweb.access.roles import VIEWER, set_role
        from numaweb.inventory.models import Cluster, Node, RejectedPod
        from numaweb.inventory.snapshot import import_snapshot

        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)  # the pages link hashed static files
        text = snapshot(args.nodes, args.rejected)
        cluster = Cluster.objects.create(name="bench")
        for run in ("first import", "same snapshot again"):
            start = time.perf_counter()
            report = import_snapshot(cluster, text)
            took = time.perf_counter() - start
            rej = report["rejected_pods"]
            print(f"{run}: {took:.1f} s, of which rejected pods {rej['seconds']:.1f} s "
                  f"({rej['kept']} kept, {len(rej['added'])} added, {rej['reproduced']} reproduced)")
        client = Client()
        user = get_user_model().objects.create_user("bench-viewer")
        set_role(user, VIEWER)
        client.force_login(user)
        pod = RejectedPod.objects.filter(cluster=cluster).order_by("id").first()
        node = Node.objects.get(pk=pod.node_id) if pod else None
        calls = {
            "API list (status=rejected, 50 rows)": f"/api/pods/?cluster={cluster.pk}&status=rejected",
            "API cluster counts": f"/api/clusters/{cluster.pk}/rejected/",
            "cluster view page": f"/clusters/{cluster.pk}/rejected",
            "a rejected pod's page": f"/rejected/{pod.pk}/" if pod else "",
            "node page (with its rejected pods)": f"/nodes/{node.pk}/" if node else "",
            "pod search (q=rejected-01)": "/pods/?q=rejected-01",
        }
        for label, url in calls.items():
            def get(url: str = url) -> None:
                response = client.get(url, HTTP_HOST="127.0.0.1")
                assert response.status_code == 200, (url, response.status_code, response.content[:300])
            median, fastest = _timed(get, args.repeat)
            print(f"{label}: median {median:.1f} ms, fastest {fastest:.1f} ms")


if __name__ == "__main__":
    main()
