"""The request histograms' folders (issue 37 rows 1 and 12): one per server, so two servers in one checkout keep
their own; what servers that are gone left is removed at start-up, before `./dev run` migrates; a disk without
room never gets memory-mapped metrics (a write to a map on a full disk kills the process)."""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.core.management import CommandError

from numaweb import metrics_store
from tests.servers import product_web_server

ROOT = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_sweep_removes_gone_servers_and_loose_files_and_keeps_running_ones(tmp_path):
    base = tmp_path / "metrics"
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = base / metrics_store.folder_name(running.pid)
        live.mkdir(parents=True)
        (live / "histogram_1.db").write_bytes(b"x" * 100)
        gone = base / metrics_store.folder_name(_dead_pid())
        gone.mkdir()
        (gone / "histogram_2.db").write_bytes(b"x" * 1_000_000)
        elsewhere = base / "server-another-host-1"  # on a shared volume: not ours to judge
        elsewhere.mkdir()
        (base / "histogram_3.db").write_bytes(b"left by an older version")
        metrics_store.sweep(base)
        assert sorted(p.name for p in base.iterdir()) == sorted([live.name, elsewhere.name])
        assert (live / "histogram_1.db").exists()
    finally:
        running.kill()
        running.wait()


def test_claim_makes_an_empty_folder_of_its_own_or_none_on_a_full_disk(tmp_path, monkeypatch):
    base = tmp_path / "metrics"
    folder = metrics_store.claim(base, os.getpid())
    assert folder == base / metrics_store.folder_name(os.getpid()) and folder.is_dir() and not any(folder.iterdir())

    class Full:
        free = metrics_store.MIN_FREE_BYTES - 1

    monkeypatch.setattr(metrics_store.shutil, "disk_usage", lambda _path: Full())
    assert metrics_store.claim(base, os.getpid()) is None


def _methods(base: str, count: int) -> None:
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    for i in range(count):
        conn.request(f"M{i:05d}" + "X" * 200, f"/made-up-{i}/")
        response = conn.getresponse()
        response.read()
        if response.getheader("Connection", "").lower() == "close":
            conn.close()
    conn.close()


def _scrape(base: str) -> bytes:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
        return response.read()


def test_two_servers_in_one_checkout_keep_their_metrics_and_made_up_methods_stay_small(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")}
    env.update(NUMAWEB_DATA_DIR=str(tmp_path / "data"), WEB_CONCURRENCY="2", PYTHONUNBUFFERED="1",
               NUMAWEB_METRICS_ALLOWED_IPS="127.0.0.1")
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = tmp_path / "data" / "metrics"
    metrics.mkdir(parents=True)
    (metrics / metrics_store.folder_name(999_999_999)).mkdir()  # a server that is gone
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(product_web_server(env, tmp_path / "web-1.log"))
        _methods(first, 3000)
        before = _scrape(first)
        second = stack.enter_context(product_web_server(env, tmp_path / "web-2.log"))
        folders = sorted(p.name for p in metrics.iterdir())
        assert len(folders) == 2 and all(name.startswith("server-") for name in folders), folders
        after = _scrape(first)
        assert len(after) < 100_000, len(after)
        counted = 'numaweb_request_seconds_count{method="other",status="'
        line = next(x for x in after.decode().splitlines() if x.startswith(counted))
        assert float(line.rsplit(" ", 1)[1]) >= 3000, line  # the second server's start wiped nothing
        assert counted in before.decode()
        assert counted not in _scrape(second).decode()  # and it counts only its own


def test_dev_run_sweeps_before_it_migrates(tmp_path, monkeypatch):
    """`./dev run` (manage.py serve) on a disk a crashed server's metrics filled: migrate failed first and the
    folder was only emptied after it. Now the sweep comes before anything writes."""
    from numaweb.scheduling.management.commands import serve

    base = tmp_path / "metrics"
    gone = base / metrics_store.folder_name(_dead_pid())
    gone.mkdir(parents=True)
    (gone / "histogram_1.db").write_bytes(b"x" * 1_000_000)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(base))
    seen = []

    def migrate(name, *args, **kwargs):
        seen.append((name, gone.exists()))
        raise CommandError("stop here")

    monkeypatch.setattr(serve, "call_command", migrate)
    with pytest.raises(CommandError):
        serve.Command().handle(addrport="127.0.0.1:8999", no_worker=True, no_demo=True)
    assert seen == [("migrate", False)]
