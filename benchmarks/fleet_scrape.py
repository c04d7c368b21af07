"""A /metrics scrape with the fleet figures at scale: `manage.py demo --nodes N --pods M` in a scratch folder
(SQLite), then scrapes through Django's test client in this process: the first one (every node's summary built
from its engine node), warm ones (nothing changed), and one after a session changed nodes; then the first scrape
of a new process (a restarted web server: the summaries read from the shared cache, not built again).

    python benchmarks/fleet_scrape.py                 # 5,000 nodes, 10,000 pending pods
    python benchmarks/fleet_scrape.py --nodes 1000 --pods 2000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.web_scale import setup

TOKEN = "fleet-benchmark"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fresh", metavar="DIR", help=argparse.SUPPRESS)  # the new process: scrape DIR's database
    args = parser.parse_args()
    if args.fresh:
        fresh_scrape(Path(args.fresh))
        return
    with tempfile.TemporaryDirectory(prefix="numaweb-fleet-") as tmp:
        setup(Path(tmp))
        from django.conf import settings
        from django.core.management import call_command
        from django.db.models import Count
        from django.test import Client

        from numaweb.inventory.models import Cluster, Node
        from numaweb.inventory.services import AllocationConflict, AllocationRefused, add_allocation

        start = time.perf_counter()
        call_command("demo", nodes=args.nodes, pods=args.pods, verbosity=0)
        print(f"demo --nodes {args.nodes} --pods {args.pods}: {time.perf_counter() - start:.1f} s")
        settings.NUMAWEB_METRICS_TOKEN = TOKEN
        client = Client(HTTP_HOST="localhost")  # a host the settings allow (testserver is not one)

        cpu_s: list[float] = []

        def scrape() -> tuple[float, int]:
            begin, begin_cpu = time.perf_counter(), time.process_time()
            response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
            assert response.status_code == 200, response.status_code
            cpu_s.append(time.process_time() - begin_cpu)
            return time.perf_counter() - begin, len(response.content)

        # the app loaded first (URLconf, views, middleware), as a served process has answered its readiness probe
        # before Prometheus scrapes it: the first scrape then measures the summaries, not Django's imports
        assert client.get("/healthz").status_code == 200
        cold, size = scrape()
        warm = [scrape()[0] for _ in range(args.repeat)]
        series = sum(1 for line in client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.splitlines()
                     if line.startswith(b"numaweb_fleet_"))
        # a change on 1 % of the nodes (a new allocation each): only those summaries are built again
        changed = 0
        largest = Cluster.objects.annotate(n=Count("nodes")).order_by("-n").first()
        for node in Node.objects.filter(cluster=largest)[: args.nodes // 100]:
            for cpu in range(node.num_cpus - 1, -1, -1):
                try:
                    add_allocation(node, pod=f"bench/fleet-{node.pk}", container="c", cpus=str(cpu))
                except (AllocationConflict, AllocationRefused):  # reserved or held: try the next CPU
                    continue
                changed += 1
                break
        after, _size = scrape()
        print(f"nodes {Node.objects.count()}, fleet series {series}, scrape {size / 1024:.0f} KB")
        print(f"first scrape (every summary built): {cold * 1000:.0f} ms (CPU {cpu_s[0] * 1000:.0f} ms)")
        print(f"warm scrape: median {statistics.median(warm) * 1000:.0f} ms, fastest {min(warm) * 1000:.0f} ms "
              f"(CPU median {statistics.median(cpu_s[1:-1]) * 1000:.0f} ms; {args.repeat} scrapes)")
        print(f"after {changed} nodes changed: {after * 1000:.0f} ms (CPU {cpu_s[-1] * 1000:.0f} ms)")
        root = Path(__file__).resolve().parent.parent
        for _ in range(2):  # the second: nothing left over from the first's start-up in the page cache
            out = subprocess.run([sys.executable, "-m", "benchmarks.fleet_scrape", "--fresh", tmp], cwd=root,
                                 capture_output=True, text=True, check=True, env=os.environ.copy())
        print(out.stdout.strip())


def fresh_scrape(data_dir: Path) -> None:
    """The first scrape of a process that never built a summary (Django set up, the database already there)."""
    os.environ.update(NUMAWEB_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="numaweb.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    settings.NUMAWEB_METRICS_TOKEN = TOKEN
    client = Client(HTTP_HOST="localhost")
    begin = time.perf_counter()
    assert client.get("/healthz").status_code == 200  # the readiness probe: the app loaded, before any scrape
    started = time.perf_counter() - begin
    begin, begin_cpu = time.perf_counter(), time.process_time()
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    took, cpu = time.perf_counter() - begin, time.process_time() - begin_cpu
    assert response.status_code == 200, response.status_code
    print(f"new process: its first request (/healthz, loading the app) {started * 1000:.0f} ms, then its first "
          f"scrape (summaries from the shared cache) {took * 1000:.0f} ms (CPU {cpu * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
