"""The operator's pages at scale: pod search and the cluster map on 5,000 nodes and 10,000 pods.

    python benchmarks/operator_scale.py                      # 5,000 nodes x 10,000 pods
    python benchmarks/operator_scale.py --nodes 1000 --pods 2000 --repeat 3

In a scratch data folder (SQLite): `manage.py demo --nodes N --pods M`, then one session that commits
(run in this process, as the worker would), so pods are found both holding CPUs the session gave them
and with a latest placement. Calls go through Django's test client; each figure is the median and the
fastest of --repeat warm calls (the fastest is the work itself; the median also holds what the shared
machine did meanwhile)."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from io import StringIO
from pathlib import Path

from benchmarks.web_scale import setup, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="numaweb-operator-"))
    try:
        setup(data_dir)
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        from numaweb.inventory.models import Allocation, Cluster
        from numaweb.scheduling import services
        from numaweb.scheduling.models import Placement

        call_command("demo", nodes=args.nodes, pods=args.pods, cluster="scale", stdout=StringIO())
        cluster = Cluster.objects.get(name="scale")
        start = time.perf_counter()
        session = services.start_session(cluster, "volcano", False)
        services.execute_session(session.pk)
        print(f"demo {args.nodes} nodes, {args.pods} pods; session #{session.pk} committed in "
              f"{time.perf_counter() - start:.1f} s; {Allocation.objects.count():,} allocations")
        user = get_user_model().objects.create_superuser("bench", password="bench-pw-1")
        client = Client(HTTP_HOST="localhost")  # a host the settings allow (testserver is not one)
        client.force_login(user)
        placed = Placement.objects.filter(session=session, admitted=True).order_by("index")[args.pods // 2]
        running = Allocation.objects.filter(origin=Allocation.IMPORTED).order_by("id").first()
        queries = {"a pod a session placed": placed.pod, "a running pod (import)": running.pod.split("/")[1],
                   "a job's pods": placed.job, "no match": "no-such-pod"}
        print()
        print("| what | matches | median / fastest |")
        print("|---|---:|---:|")
        for what, q in queries.items():
            (median, fastest), response = timed(lambda q=q: client.get("/api/pods/", {"q": q}), args.repeat)
            assert response.status_code == 200, response.content[:300]
            print(f"| `GET /api/pods/?q=` {what} | {response.json()['count']} | "
                  f"{median * 1000:.1f} / {fastest * 1000:.1f} ms |")
        (median, fastest), response = timed(lambda: client.get("/pods/", {"q": placed.pod}), args.repeat)
        assert response.status_code == 200
        print(f"| `/pods/?q=` page, a pod a session placed | 1 | {median * 1000:.1f} / {fastest * 1000:.1f} ms |")
        url = f"/clusters/{cluster.pk}/map"
        start = time.perf_counter()
        cold = client.get(url)
        print(f"| cluster map, first call (usage of every node computed) | {args.nodes} marks | "
              f"{(time.perf_counter() - start) * 1000:.0f} ms, {len(cold.content) / 1024:.0f} KiB |")
        for what, params in (("free CPUs on the best NUMA node", {}),
                             ("free single-NUMA blocks of 8", {"measure": "blocks", "size": 8}),
                             ("TopologyAffinityErrors of the session", {"measure": "errors", "session": session.pk})):
            (median, fastest), response = timed(lambda p=params: client.get(url, p), args.repeat)
            marks = json.loads(response.content.decode().split('id="cluster-map-data" type="application/json">')[1]
                               .split("</script>")[0])  # the marks the page's script draws
            assert response.status_code == 200 and sum(len(g["ids"]) for g in marks["groups"]) == args.nodes
            print(f"| cluster map, {what} | {args.nodes} marks | {median * 1000:.1f} / {fastest * 1000:.1f} ms |")
    finally:
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        else:
            print(f"kept {data_dir}")


if __name__ == "__main__":
    main()
