"""DRA at scale: a generated snapshot of N nodes (benchmarks.snapshot_import's nodes: 128 CPUs, 4 NUMA nodes,
single-numa-node, 4 running pods each) where every node's ResourceSlice publishes 8 GPUs (2 per NUMA node,
`gpu.example.com/numaNode`) and each node's first running pod holds one GPU through an allocated claim, on
NUMA node `i % 4` (about three pods in four end up misaligned with the CPUs the replay pins: the point is the
volume); imported with `import_snapshot` into a scratch SQLite database, then the pages and API calls that show
DRA are timed (fastest and median of `--repeat` calls).

    python -m benchmarks.dra_pages [--nodes 5000] [--repeat 5]"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.rejected_pods import _timed

ROOT = Path(__file__).resolve().parent.parent
DRIVER = "gpu.example.com"


def snapshot(nodes: int) -> str:
    from benchmarks.snapshot_import import generated_snapshot

    doc = json.loads(generated_snapshot(nodes, 4, as_json=True))
    pods = {o["metadata"]["name"]: o for o in doc["items"] if o["kind"] == "Pod"}
    doc["items"].append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    for i in range(nodes):
        node = f"node-{i:05d}"
        doc["items"].append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{g}", "attributes": {"numaNode": {"int": g // 2},
                                                                     "model": {"string": "A100"}}}
                                 for g in range(8)]}})
        pod = pods[f"{node}-p0"]
        claim = f"{node}-p0-gpu"
        doc["items"].append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{(i % 4) * 2}"}]}},
                "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}]}})
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return json.dumps(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
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
        from numaweb.inventory.models import Cluster, PodAlignment
        from numaweb.inventory.snapshot import import_snapshot

        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)  # the pages link hashed static files
        text = snapshot(args.nodes)
        print(f"snapshot: {args.nodes} nodes, {args.nodes * 8} DRA GPUs, {len(text) / 2**20:.1f} MiB of JSON")
        cluster = Cluster.objects.create(name="bench")
        for run in ("first import", "same snapshot again"):
            start = time.perf_counter()
            report = import_snapshot(cluster, text)
            dra = report["dra"]
            print(f"{run}: {time.perf_counter() - start:.1f} s; {dra['devices']} devices, {dra['pods']} pods "
                  f"using them, {len(dra['misaligned'])} misaligned, changed {dra['changed']}")
        client = Client()
        user = get_user_model().objects.create_user("bench-viewer")
        set_role(user, VIEWER)
        client.force_login(user)
        pod = PodAlignment.objects.filter(cluster=cluster, aligned=False).order_by("id").first()
        assert pod is not None and pod.node_id is not None
        calls = {
            "API misaligned=true (50 rows)": f"/api/pods/?cluster={cluster.pk}&misaligned=true",
            "API search q=node-00001 (alignment on every row)": f"/api/pods/?cluster={cluster.pk}&q=node-00001",
            "pod search page, only misaligned (100 rows)": f"/pods/?cluster={cluster.pk}&misaligned=true",
            "cluster map (misaligned nodes in red)": f"/clusters/{cluster.pk}/map",
            "node page (8 GPUs in the grid)": f"/nodes/{pod.node_id}/",
            "a pod's DRA page": f"/pods/dra/{pod.pk}/",
        }
        for label, url in calls.items():
            def get(url: str = url) -> None:
                response = client.get(url, HTTP_HOST="127.0.0.1")
                assert response.status_code == 200, (url, response.status_code, response.content[:300])
            median, fastest = _timed(get, args.repeat)
            print(f"{label}: median {median:.1f} ms, fastest {fastest:.1f} ms")


if __name__ == "__main__":
    main()
