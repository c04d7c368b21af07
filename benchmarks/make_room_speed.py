"""Make room at scale, on a real worker.

    python benchmarks/make_room_speed.py                  # demo --nodes 5000 --pods 10000, fragmented
    python benchmarks/make_room_speed.py --nodes 500 --pods 1000

In a scratch data folder (SQLite + the file-system queue, the embedded default): migrate, build the
large demo cluster (`manage.py demo --nodes N --pods M`), then fragment its `single-numa-node` pool the
way make room exists for: every NUMA node of those nodes gets small pods (namespace `batch`, one core
each: 2 CPUs, or 8 on NUMA nodes with more than 24 free) in the middle of its free cores until at most
14 of its CPUs are free, so a 16-CPU `single-numa-node` pod fits none of them. One worker process
(`celery worker`, solo pool) answers; each question is timed from `start` to its row done, as a user
waits for it (the worker loads the cluster, searches, verifies, writes the plan and its session).

Questions (Volcano's profile: a `single-numa-node` task goes only to `single-numa-node` nodes):
- 16-CPU pods × 8 and × 4: a plan is expected (one 2-CPU move per pod);
- 32-CPU pods × 8: needs more moves than the bound (NUMAWEB_MAKE_ROOM_MAX_MOVES): "no plan within the bounds";
- 16-CPU pods × 8 with `batch` protected: only the demo's own running pods may move;
- the first three pending demo jobs of up to 8 pods with a 16-CPU-or-more single-numa-node task.
Exit status 0 when every question was answered (a verified plan or "no plan") in under 10 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 10.0
KEEP_FREE = 14


def manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def fragment(cluster) -> int:
    """Small pods on every NUMA node of the single-numa-node pool, as allocation rows (see above)."""
    from numaweb.inventory.models import Allocation
    from numaweb.inventory.services import cluster_nodes
    from scheduler_core.model.cpuset import CPUSet
    from scheduler_core.model.node import Allocation as EngineAllocation

    nodes, seen = cluster_nodes(cluster)
    rows = []
    for node in nodes:
        if node.kubelet.topology_manager_policy != "single-numa-node":
            continue
        threads: dict[int, list[int]] = {}
        for cpu in node.topology.cpus:
            threads.setdefault(cpu.core, []).append(cpu.id)
        for numa, mask in sorted(node.topology.numa_cpus.items()):
            while (node.free_cpus & mask).bit_count() > KEEP_FREE:
                free = node.free_cpus & mask
                size = 2 if free.bit_count() <= 24 else 8
                cores = sorted({c.core for c in node.topology.cpus if c.numa == numa and free >> c.id & 1})
                picked: list[int] = []
                for core in cores[len(cores) // 2:] + cores[:len(cores) // 2]:  # from the middle
                    picked += [c for c in threads[core] if free >> c & 1][:size - len(picked)]
                    if len(picked) == size:
                        break
                alloc = EngineAllocation(f"batch/frag-{len(rows)}", "app", CPUSet(picked))
                node.allocate(alloc)
                rows.append(Allocation(cluster=cluster, node_id=seen[node.name][0], pod=alloc.pod, container="app",
                                       cpus=str(alloc.cpus)))
    Allocation.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="numaweb-room-") as tmp:
        data = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        env.update(NUMAWEB_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="numaweb.settings", PYTHONUNBUFFERED="1")
        manage(env, "migrate", "--noinput")
        manage(env, "demo", "--nodes", str(args.nodes), "--pods", str(args.pods))
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        from numaweb.startup import prepare

        prepare()  # the data folder, queue folder and secret key (settings never write)
        django.setup()
        from numaweb.inventory.models import Allocation, Cluster
        from numaweb.jobs.models import Job
        from numaweb.room import services, tasks
        from numaweb.room.models import RoomPlan

        cluster = Cluster.objects.get(name="large")
        print(f"demo: {args.nodes} nodes, {args.pods} pending pods; fragmenting pods added: {fragment(cluster)}; "
              f"allocations now {Allocation.objects.filter(cluster=cluster).count()}")
        log = open(data / "worker.log", "wb")  # noqa: SIM115 (closed with the process)
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "numaweb", "worker", "--pool", "solo",
                                   "--concurrency", "1", "-n", "room@%h", "--loglevel", "WARNING"], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
        shape = {"cpu": "16", "memory": "8Gi"}
        questions = [
            ("16 CPU × 8", {"shape": shape, "count": 8, "policy": "single-numa-node", "profile": "volcano"}),
            ("16 CPU × 4", {"shape": shape, "count": 4, "policy": "single-numa-node", "profile": "volcano"}),
            ("32 CPU × 8", {"shape": {"cpu": "32", "memory": "8Gi"}, "count": 8, "policy": "single-numa-node",
                            "profile": "volcano"}),
            ("16 CPU × 8, batch protected", {"shape": shape, "count": 8, "policy": "single-numa-node",
                                             "profile": "volcano", "protected_namespaces": ["batch"]}),
        ]
        questions += [(f"job {j.name} ({j.replicas} pods)", {"job": j.pk, "profile": "volcano"})
                      for j in Job.objects.prefetch_related("tasks").order_by("id")
                      if j.replicas <= 8 and any(t.topology_policy == "single-numa-node"
                                                 and t.template["containers"][0]["requests"].get("cpu", 0) >= 16000
                                                 for t in j.tasks.all())][:3]
        worst = 0.0
        try:
            warm = tasks.start(services.parse_request(cluster, questions[-1][1]))  # worker start-up
            deadline = time.monotonic() + args.timeout
            while not RoomPlan.objects.get(pk=warm.pk).finished and time.monotonic() < deadline:
                time.sleep(0.05)
            for label, question in questions:
                started = time.perf_counter()
                row = tasks.start(services.parse_request(cluster, question))
                deadline = time.monotonic() + args.timeout
                while not RoomPlan.objects.get(pk=row.pk).finished:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{label}: not answered within {args.timeout:.0f} s")
                    time.sleep(0.05)
                elapsed = time.perf_counter() - started
                row.refresh_from_db()
                if row.status != RoomPlan.DONE:
                    raise RuntimeError(f"{label}: {row.error}")
                r = row.result
                worst = max(worst, elapsed)
                if r["fits_now"]:
                    answer = "fits now"
                elif r["found"]:
                    proof = "proven minimal" if r["minimal"] else f"not proven minimal, at least {r['lower_bound']}"
                    answer = (f"{len(r['moves'])} moves, {r['moved_cpus']} CPUs, {proof}, verified by session "
                              f"{r['after']['session']} ({r['after']['pods_placed']} placed, "
                              f"{r['after']['topology_affinity_errors']} TAE)")
                else:
                    answer = f"no plan: {r['reason']}"
                stats = r["stats"]
                print(f"{label:34s} {elapsed:6.2f} s (engine {row.engine_ms / 1000:.2f} s, "
                      f"{stats.get('options_evaluated', 0)} options, {stats.get('checks', 0)} checks): {answer}")
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            log.close()
    print(f"slowest answer {worst:.2f} s; target < {TARGET_S:.0f} s")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
