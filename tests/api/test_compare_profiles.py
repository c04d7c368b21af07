"""`python -m benchmarks.compare_profiles`, the six profiles side by side as an operator runs them (real workers,
the REST API, the exports and the page's charts), on a small demo: every profile has its row in the CSV with the
kubelet's refusals by reason, and the charts file draws a bar per profile and a heat strip per profile."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from scheduler_core.scheduler.profiles import PROFILES

ROOT = Path(__file__).resolve().parents[2]


def test_six_profiles_compared_exported_and_charted(tmp_path):
    run = subprocess.run([sys.executable, "-m", "benchmarks.compare_profiles", "--nodes", "40", "--pods", "80",
                          "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "comparison.csv").open()))
    assert [r["profile"] for r in rows] == list(PROFILES) and all(r["status"] == "done" for r in rows)
    for row in rows:  # the refusals add up, by reason, in every row
        reasons = sum(int(row[k]) for k in row if k.startswith("rejected_")) + int(row["topology_affinity_errors"])
        assert int(row["pods_placed"]) - int(row["pods_admitted"]) == int(row["pods_rejected"]) == reasons
    export = json.loads((tmp_path / "comparison.json").read_text())
    assert [v["profile"] for v in export["variants"]] == list(PROFILES)
    assert all(v["nodes"] for v in export["variants"])  # the per-node tables the strips are drawn from
    charts = (tmp_path / "charts.html").read_text()
    assert charts.count('data-metric-row="pods_rejected"') == 1
    assert charts.count('class="chart-bar series-') >= 6 * 10  # a bar per profile in each metric's chart
    assert charts.count('data-chart="heat"') == len(PROFILES)  # every strip drawn in place, none left to load
    assert "hx-get" not in charts.split('data-strip="0"', 1)[1]
    printed = {line.split()[0]: line.split()[1:] for line in run.stdout.splitlines() if line.split()[:1]}
    for row in rows:  # the printed table is the export's
        assert printed[row["profile"]][:4] == [f"{int(row[k]):,}" for k in ("pods_placed", "pods_admitted",
                                                                             "pods_rejected", "pods_unplaced")]
