"""Importer speed: a 48-thread sysfs tarball as hwloc-gather-topology writes it (target < 100 ms),
the corpus's sysfs tarballs, and a generated 1,000-node cluster snapshot (target < 10 s, see
`import_cluster`).

    python -m benchmarks.import_speed [--snapshot-nodes 1000]

Best of 5 per file (import only, the file already in memory)."""

from __future__ import annotations

import argparse
import pathlib
import time

from scheduler_core.formats import load
from tests.formats.writers import sysfs_tarball, xeon

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "formats" / "data"


def best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    cases = {"generated 48-thread sysfs tar.bz2 (2×12×2)": sysfs_tarball(xeon(2, 12, 2))}
    for path in sorted(CORPUS.glob("**/*.tar.*")):
        cases[str(path.relative_to(CORPUS))] = path.read_bytes()
    for name, raw in cases.items():
        threads = len(load(raw).topology.cpus)
        print(f"{name:<60} {threads:>4} threads {best_of(5, lambda raw=raw: load(raw)) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
