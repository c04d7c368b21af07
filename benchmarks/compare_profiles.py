"""Every profile side by side on the large demo cluster: one comparison, exported and charted.

    python -m benchmarks.compare_profiles                          # demo --nodes 5000 --pods 10000, 2 workers
    python -m benchmarks.compare_profiles --nodes 500 --pods 1000 --out /tmp/six

What an operator choosing a NUMA-aware scheduler does, on the path they use: in a scratch data folder (SQLite and
the file-system queue, the embedded default) build `manage.py demo --nodes N --pods M`, start real Celery workers,
then, as an admin over the REST API, `POST /api/comparisons/` with one variant per registered profile (volcano,
aligned, unaware, nrt, kai, koordinator) and a headroom shape, poll it until done, and write to --out:
- `comparison.csv` and `comparison.json`: the API's exports (`/api/comparisons/<id>/export/?format=csv|json`);
- `charts.html`: the comparison page's body as the page shows it (metrics table, why the variants differ, the
  charts and every variant's heat strip), with the project's stylesheet inlined, so the file opens anywhere;
- and prints, per profile, pods placed, admitted, refused by the kubelet (by reason), unplaced and headroom.
Exit status 0 when every variant is done and each one's kubelet refusals add up (placed − admitted = refused).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.compare_speed import scratch_demo, start_workers, wait

ROOT = Path(__file__).resolve().parent.parent
STRIP = re.compile(r'(<figure class="chart-box wide" data-strip="(\d+)"><figcaption>.*?</figcaption>)<a .*?</a>', re.S)


def charts_page(title: str, page: str, strips: list[str]) -> str:
    """The comparison page's body (metrics table, gap notes, charts) with every heat strip in place of its htmx
    placeholder, and the project's stylesheet inlined: one file that opens anywhere."""
    css = (ROOT / "static" / "css" / "numaweb.css").read_text()
    body = page[page.index('<section id="comparison-body"') : page.index("</main>")]
    body = re.sub(r"<form\b.*?</form>", "", body, flags=re.S)  # make room's form: nothing to post to offline
    body = STRIP.sub(lambda m: m.group(1) + strips[int(m.group(2))], body)
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{title}</title><style>{css}</style>"
        f"<body><main><h1>{title}</h1>\n{body}\n</main></body></html>\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shape", default="4,8Gi", help="headroom shape cpu,memory (default 4,8Gi)")
    parser.add_argument("--out", type=Path, default=Path("compare-profiles"), help="folder for the exports")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="numaweb-profiles-") as tmp:
        data = Path(tmp)
        env = scratch_demo(data, args.nodes, args.pods, static=True)  # the page links hashed static files
        from django.contrib.auth import get_user_model
        from django.test import Client

        from numaweb.inventory.models import Cluster
        from scheduler_core.scheduler.profiles import PROFILES

        cluster = Cluster.objects.get(name="large")
        user = get_user_model().objects.create_superuser("profiles", password="profiles-pw-1")
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        workers = start_workers(env, args.workers, data)
        try:
            cpu, _, memory = args.shape.partition(",")
            body = {
                "cluster": cluster.pk,
                "variants": [{"profile": p} for p in PROFILES],
                "shape": {"cpu": cpu, "memory": memory or "0"},
            }
            started = time.perf_counter()
            answer = client.post("/api/comparisons/", body, content_type="application/json")
            if answer.status_code != 202:
                raise RuntimeError(f"POST /api/comparisons/ answered {answer.status_code}: {answer.content[:300]!r}")
            url = f"/api/comparisons/{answer.json()['id']}/"

            def ended() -> bool:
                return client.get(url).json()["status"] in ("done", "failed")

            wait(ended, args.timeout, "comparison")
            print(
                f"comparison of {len(PROFILES)} profiles over {cluster.jobs.count():,} jobs: "
                f"{time.perf_counter() - started:.0f} s with {args.workers} workers"
            )
            comparison = client.get(url).json()
            csv = client.get(url + "export/?format=csv")
            export = client.get(url + "export/?format=json")
            page = client.get(f"/comparisons/{comparison['id']}/").content.decode()
            strips = [
                client.get(f"/comparisons/{comparison['id']}/strips/{i}").content.decode() for i in range(len(PROFILES))
            ]
        finally:
            for proc in workers:
                proc.terminate()
            for proc in workers:
                proc.wait(timeout=30)
    (args.out / "comparison.csv").write_bytes(csv.content)
    (args.out / "comparison.json").write_bytes(export.content)
    title = f"Six profiles on {args.nodes:,} nodes, {args.pods:,} pods (comparison {comparison['id']})"
    (args.out / "charts.html").write_text(charts_page(title, page, strips))
    ok = comparison["status"] == "done"
    print(
        f"{'profile':12s} {'placed':>7s} {'admitted':>8s} {'refused':>7s} {'unplaced':>8s} {'headroom':>9s}"
        f" {'admitted':>9s}  refused by reason"
    )
    for v in comparison["variants"]:
        m = v.get("metrics") or {}
        reasons = m.get("admission_errors_by_reason", {})
        ok = (
            ok
            and v["status"] == "done"
            and m["pods_placed"] - m["pods_admitted"] == m["pods_rejected"] == sum(reasons.values())
        )
        print(
            f"{v['label']:12s} {m.get('pods_placed', 0):7,d} {m.get('pods_admitted', 0):8,d} "
            f"{m.get('pods_rejected', 0):7,d} {m.get('pods_unplaced', 0):8,d} {m.get('headroom', 0):9,d} "
            f"{m.get('headroom_admitted', 0):9,d}  {json.dumps(reasons)}"
        )
    print(f"wrote {args.out}/comparison.csv, comparison.json, charts.html")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
