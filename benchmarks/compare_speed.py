"""A comparison of three variants against single sessions, on real workers.

    python benchmarks/compare_speed.py                       # 1,000 nodes, 2,000 pods, 2 workers
    python benchmarks/compare_speed.py --nodes 200 --pods 400 --workers 1 --shape 4,8Gi

In a scratch data folder (SQLite + the file-system queue, the embedded default): migrate, build the
large demo cluster (`manage.py demo --nodes N --pods M`), start N worker processes (`celery worker`,
one solo pool each) and let each run an empty session (start-up), then time from the call to `done`,
as a user waits for it:
- one dry-run session per profile (volcano, aligned, unaware), one after the other;
- one comparison of the three profiles (their variants run in parallel on the workers), with the
  headroom shape if given.
Prints each figure and the comparison's time over the mean and the slowest single session (target:
under 3× one session). Exit status 0 when the comparison took under 3× the mean session.
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

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("volcano", "aligned", "unaware")


def manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def scratch_demo(data: Path, nodes: int, pods: int, static: bool = False) -> dict:
    """The embedded default in `data` (SQLite, the file-system queue) holding `demo --nodes --pods` (and the hashed
    static files the pages link, with `static`), Django set up in this process; returns the workers' environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(NUMAWEB_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="numaweb.settings", PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    manage(env, "migrate", "--noinput")
    manage(env, "demo", "--nodes", str(nodes), "--pods", str(pods))
    if static:
        manage(env, "collectstatic", "--noinput")
    print(f"cluster of {nodes} nodes and {pods} pending pods built in {time.perf_counter() - started:.1f} s")
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    from numaweb.startup import prepare

    prepare()  # the data folder, queue folder and secret key (settings never write)
    django.setup()
    return env


def start_workers(env: dict, count: int, log_dir: Path) -> list[subprocess.Popen]:
    procs = []
    for i in range(count):
        log = open(log_dir / f"worker-{i}.log", "wb")  # noqa: SIM115 (closed with the process)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "numaweb", "worker", "--pool", "solo", "--concurrency", "1",
             "-n", f"bench{i}@%h", "--loglevel", "WARNING"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    return procs


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not finish within {timeout:.0f} s")
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shape", default="", help="headroom shape cpu,memory (e.g. 4,8Gi); default: none")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--serve-worker", action="store_true",
                        help="one worker exactly as `./dev run` starts it (a prefork pool, a process per core) "
                             "instead of --workers solo ones")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="numaweb-compare-") as tmp:
        data = Path(tmp)
        env = scratch_demo(data, args.nodes, args.pods)
        from numaweb.comparisons.models import Comparison
        from numaweb.comparisons.services import start_comparison
        from numaweb.inventory.models import Cluster
        from numaweb.scheduling.models import SchedulingSession
        from numaweb.scheduling.services import start_session
        from scheduler_core.scheduler.compare import Shape, Variant

        cluster = Cluster.objects.get(name="large")
        if args.serve_worker:
            from numaweb.worker.supervisor import worker_command

            log = open(data / "worker.log", "wb")  # noqa: SIM115 (closed with the process)
            workers = [subprocess.Popen(worker_command("WARNING"), cwd=ROOT, env=env, stdout=log,
                                        stderr=subprocess.STDOUT)]
        else:
            workers = start_workers(env, args.workers, data)
        try:
            warm = [start_session(cluster, "unaware", dry_run=True, jobs=[]) for _ in range(args.workers)]
            wait(lambda: all(SchedulingSession.objects.get(pk=w.pk).finished for w in warm), args.timeout,
                 "warm-up (workers starting)")
            sessions = {}
            for profile in PROFILES:
                started = time.perf_counter()
                session = start_session(cluster, profile, dry_run=True)

                def finished(pk=session.pk) -> bool:
                    return SchedulingSession.objects.get(pk=pk).finished

                wait(finished, args.timeout, f"{profile} session")
                session.refresh_from_db()
                if session.status != SchedulingSession.DONE:
                    raise RuntimeError(f"{profile} session failed: {session.error}")
                sessions[profile] = time.perf_counter() - started
                print(f"session {profile:8s} {sessions[profile]:7.2f} s (engine {session.engine_ms / 1000:.2f} s, "
                      f"{session.pods_placed}/{session.pods_total} placed)")
            shape = None
            if args.shape:
                cpu, _, memory = args.shape.partition(",")
                shape = Shape.parse(cpu, memory or None)
            started = time.perf_counter()
            comparison = start_comparison(cluster, [Variant(p) for p in PROFILES], shape=shape)

            def closed() -> bool:
                return Comparison.objects.get(pk=comparison.pk).finished_at is not None

            wait(closed, args.timeout, "comparison")
            elapsed = time.perf_counter() - started
            comparison = Comparison.objects.prefetch_related("variants").get(pk=comparison.pk)
            if comparison.status != Comparison.DONE:
                raise RuntimeError("comparison failed: " + "; ".join(v.error for v in comparison.variants.all()))
            for v in comparison.variants.all():
                print(f"  variant {v.label:8s} engine {v.engine_ms / 1000:7.2f} s on {v.worker} "
                      f"({(v.finished_at - v.started_at).total_seconds():.2f} s in the worker)")
        finally:
            for proc in workers:
                proc.terminate()
            for proc in workers:
                proc.wait(timeout=30)
    mean, slowest = statistics.mean(sessions.values()), max(sessions.values())
    who = f"the `./dev run` worker ({os.cpu_count()} processes)" if args.serve_worker else f"{args.workers} worker(s)"
    print(f"comparison of {len(PROFILES)} variants{' + headroom ' + args.shape if args.shape else ''} with "
          f"{who}: {elapsed:.2f} s = {elapsed / mean:.2f}× the mean session ({mean:.2f} s), "
          f"{elapsed / slowest:.2f}× the slowest ({slowest:.2f} s); target < 3× one session")
    return 0 if elapsed < 3 * mean else 1


if __name__ == "__main__":
    sys.exit(main())
