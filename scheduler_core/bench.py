"""`python -m scheduler_core.bench`: scheduling throughput on synthetic clusters.

Builds a cluster of two node shapes — 2 sockets × 2 NUMA × 16 cores × 2 threads (64 CPUs), and
2 × 4 × 16 × 2 (128 CPUs) with 1 GPU and 1 NIC per NUMA node — with mixed kubelet policies, and a
workload of single-pod jobs (plus a few gangs) of mixed sizes and task policies; runs one session
and prints pods/s, µs per pod × node evaluation (as if every node were evaluated), peak memory
(ru_maxrss), and the size of the JSON explanation. Also prints the hint-merge and CPU-selection
micro-benchmarks of `hints.bench_merge()` and `cpu.bench_take_by_topology()` when present.

    python -m scheduler_core.bench --nodes 1000 --pods 2000 --profile volcano
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time

from .jobs import Job, Task
from .kubelet import KubeletConfig
from .node import Node
from .pods import Container, Pod
from .session import PROFILES, Cluster, run_session
from .topology import synthetic

GiB = 2**30
POLICIES = ("single-numa-node", "best-effort", "restricted", "none")
GPU, NIC = "nvidia.com/gpu", "example.com/nic"


def make_cluster(nodes: int, seed: int = 1) -> Cluster:
    """`nodes` nodes: 3 of 4 small (64 CPUs), 1 of 4 large (128 CPUs, GPUs and NICs per NUMA node);
    kubelet topology policies rotate through the four policies, CPU Manager static."""
    small = synthetic(2, 2, 16, 2, memory_per_numa=64 * GiB)
    large = synthetic(2, 4, 16, 2, memory_per_numa=64 * GiB, devices_per_numa={GPU: 1, NIC: 1})
    configs = {p: KubeletConfig(cpu_manager_policy="static", topology_manager_policy=p, reserved_cpu_milli=1000)
               for p in POLICIES}
    rng = random.Random(seed)
    out = []
    for i in range(nodes):
        topo = large if i % 4 == 3 else small
        out.append(Node(f"node-{i:05d}", topo, configs[rng.choice(POLICIES)]))
    return Cluster(out)


def make_jobs(pods: int, seed: int = 2) -> list[Job]:
    """Mostly single-pod jobs (1–24 CPUs, task policies mixed, some Burstable, some with a GPU) and
    a gang of 4 every 50 pods."""
    rng = random.Random(seed)
    jobs: list[Job] = []
    made = 0
    index = 0
    while made < pods:
        policy = rng.choice((*POLICIES, None))
        cpus = rng.choice((1, 2, 2, 4, 4, 6, 8, 12, 16, 24))
        devices = {GPU: 1} if rng.random() < 0.1 else None
        if rng.random() < 0.15:
            container = Container("app", {"cpu": cpus * 500, "memory": GiB}, {"cpu": cpus * 1000, "memory": GiB})
        else:
            container = Container.guaranteed("app", cpus * 1000, 2 * GiB, devices=devices)
        template = Pod("t", (container,))
        replicas = 4 if index % 50 == 49 and pods - made >= 4 else 1
        jobs.append(Job(f"job-{index:05d}", (Task("worker", template, replicas, policy),),
                        min_available=replicas, submitted=index, priority=rng.choice((0, 0, 0, 1))))
        made += replicas
        index += 1
    return jobs


def run(nodes: int, pods: int, profile: str, explain: bool = True) -> dict:
    t0 = time.perf_counter()
    cluster = make_cluster(nodes)
    jobs = make_jobs(pods)
    build = time.perf_counter() - t0
    result = run_session(cluster, jobs, profile=profile)
    t = result.timings
    size = None
    if explain:
        t1 = time.perf_counter()
        size = len(json.dumps(result.to_dict(), separators=(",", ":")))
        t["to_dict_s"] = time.perf_counter() - t1
    return {"nodes": nodes, "pods": pods, "profile": profile, "build_s": build, "session_s": t["total_s"],
            "pods_per_s": t["pods_per_s"], "us_per_pod_node": t["us_per_pod_node"],
            "evaluations": t["evaluations"], "class_visits": t["class_visits"],
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "explanation_bytes": size, "counts": result.counts}


def _micro() -> None:
    from .cpu import bench_take_by_topology
    from .hints import bench_merge

    for title, rows, fmt in (("hint merge (ms per merge):", bench_merge(), "10.3f"),
                             ("take_by_topology (µs per call):", bench_take_by_topology(), "10.1f")):
        print(title)
        for label, value in rows:
            print(f"  {value:{fmt}}  {label}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_core.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--profile", choices=(*PROFILES, "all"), default="volcano")
    parser.add_argument("--no-explain", action="store_true", help="skip serialising the explanation")
    parser.add_argument("--no-micro", action="store_true", help="skip the merge / CPU-selection micro-benchmarks")
    parser.add_argument("--json", action="store_true", help="print one JSON object per run")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 0:
        parser.error("--nodes must be at least 1 and --pods non-negative")
    profiles = PROFILES if args.profile == "all" else (args.profile,)
    for profile in profiles:
        r = run(args.nodes, args.pods, profile, not args.no_explain)
        if args.json:
            print(json.dumps(r))
            continue
        print(f"profile {profile}: {r['nodes']} nodes × {r['pods']} pods")
        print(f"  session        {r['session_s']:.2f} s   ({r['pods_per_s']:.0f} pods/s; cluster built in "
              f"{r['build_s']:.2f} s)")
        print(f"  per pod×node   {r['us_per_pod_node']:.3f} µs   ({r['evaluations']} class evaluations, "
              f"{r['class_visits']} class visits)")
        print(f"  peak memory    {r['peak_rss_mib']:.0f} MiB (max RSS)")
        if r["explanation_bytes"] is not None:
            print(f"  explanation    {r['explanation_bytes'] / 2**20:.1f} MiB JSON")
        print(f"  counts         {r['counts']}")
        sys.stdout.flush()
    if not args.no_micro:
        _micro()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
