"""Cluster snapshot import speed: a generated kubectl snapshot of N nodes (target: 1,000 nodes < 10 s).

    python -m benchmarks.snapshot_import [--nodes 1000] [--pods-per-node 4] [--yaml]

Each node is 2 sockets × 2 NUMA nodes × 16 cores × 2 threads (128 CPUs) described by a Numatopology,
a NodeResourceTopology v1alpha2 and a Node; it runs `--pods-per-node` Guaranteed pods of 2–12 CPUs,
and there is one pending Volcano Job (with its PodGroup) per 10 nodes. The snapshot is written as
`kubectl get ... -o json` writes it (one `kind: List`, 4-space indents; `--yaml`: as `-o yaml`) and
imported with `manage.py import_cluster`
into a scratch SQLite database; the time printed is the command's own (parse + replay + writes)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _node_objects(name: str) -> list[dict]:
    detail = {}
    for cpu in range(128):  # SMT siblings N and N+64
        core = cpu % 64
        socket, numa = core // 32, core // 16
        detail[str(cpu)] = {k: v for k, v in (("numa", numa), ("socket", socket), ("core", core % 32)) if v}
    numatopo = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
                "spec": {"cpuDetail": detail, "numares": {"cpu": {"allocatable": "1-127", "capacity": 128}},
                         "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node",
                                      "TopologyManagerScope": "container"}}}
    zones = [{"name": f"node-{n}", "type": "Node",
              "costs": [{"name": f"node-{m}", "value": 10 if m == n else 21 if m // 2 != n // 2 else 12}
                        for m in range(4)],
              "resources": [{"name": "cpu", "capacity": 32, "allocatable": 32 - (n == 0), "available": 20},
                            {"name": "memory", "capacity": str(64 << 30), "allocatable": str(64 << 30),
                             "available": str(48 << 30)}]} for n in range(4)]
    nrt = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology", "metadata": {"name": name},
           "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                          {"name": "topologyManagerScope", "value": "container"}],
           "zones": zones}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": name[:6]}},
            "status": {"capacity": {"cpu": "128", "memory": "256Gi", "pods": "110"},
                       "allocatable": {"cpu": "127", "memory": "255Gi", "pods": "110"}}}
    return [node, nrt, numatopo]


def _pod(name: str, node: str, cpus: int, created: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "creationTimestamp": f"2026-11-20T{created // 3600 % 24:02d}:{created // 60 % 60:02d}:"
                                              f"{created % 60:02d}Z"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox", "resources": {
                "limits": {"cpu": str(cpus), "memory": f"{cpus}Gi"}}}]},
            "status": {"phase": "Running", "qosClass": "Guaranteed"}}


def _job(name: str) -> list[dict]:
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
           "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": "default", "tasks": [
               {"name": "worker", "replicas": 2, "topologyPolicy": "single-numa-node", "template": {"spec": {
                   "containers": [{"name": "w", "image": "busybox",
                                   "resources": {"limits": {"cpu": "4", "memory": "4Gi"}}}]}}}]},
           "status": {"state": {"phase": "Pending"}}}
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": f"{name}-uid", "namespace": "default",
                          "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                               "name": name}]},
             "spec": {"minMember": 2}}
    return [job, group]


def generated_snapshot(nodes: int, pods_per_node: int = 4, as_json: bool = False) -> str:
    """A kubectl snapshot of `nodes` nodes (see the module docstring) as YAML or JSON text."""
    import yaml

    items: list[dict] = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        items += _node_objects(name)
        items += [_pod(f"{name}-p{k}", name, 2 + (i + 3 * k) % 11, i * 10 + k) for k in range(pods_per_node)]
        if i % 10 == 0:
            items += _job(f"pending-{i:05d}")
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    if as_json:
        return json.dumps(doc, indent=4)
    return yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=4)
    parser.add_argument("--yaml", action="store_true", help="write the snapshot as -o yaml instead of -o json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("snapshot.yaml" if args.yaml else "snapshot.json")
        start = time.perf_counter()
        path.write_text(generated_snapshot(args.nodes, args.pods_per_node, not args.yaml))
        print(f"generated {args.nodes} nodes in {time.perf_counter() - start:.1f} s: "
              f"{path.stat().st_size / 2**20:.1f} MiB")
        env = {**os.environ, "DATABASE_PATH": f"{tmp}/bench.sqlite3"}
        env.pop("DATABASE_URL", None)
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "-v", "0"], check=True, env=env, cwd=ROOT)
        for run in ("first import", "same snapshot again"):
            start = time.perf_counter()
            out = subprocess.run([*manage, "import_cluster", str(path), "--cluster", "bench"], check=True, env=env,
                                 cwd=ROOT, capture_output=True, text=True).stdout
            lines = out.splitlines()
            print(f"{run}: {lines[0]}\n  {lines[-1]} (process {time.perf_counter() - start:.1f} s)")
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(f"CPU time of the commands (migrate included): {usage.ru_utime + usage.ru_stime:.1f} s")


if __name__ == "__main__":
    main()
