"""`manage.py serve` starts as fast as the machine allows: collectstatic only when a static source changed,
and a worker with one pool process per CPU core, so a comparison's variants run side by side."""

import os

from numaweb.scheduling.management.commands import serve
from numaweb.worker import supervisor


def test_collectstatic_runs_only_when_a_static_source_changed(settings, tmp_path):
    source = tmp_path / "src"
    (source / "css").mkdir(parents=True)
    css = source / "css" / "extra.css"
    css.write_text("body { color: #111; }")
    settings.STATICFILES_DIRS = [*settings.STATICFILES_DIRS, source]
    settings.STATIC_ROOT = tmp_path / "static"
    assert serve.collect_static() is True  # first start: everything collected
    assert (tmp_path / "static" / "css" / "extra.css").exists()
    assert serve.collect_static() is False  # nothing changed: skipped
    css.write_text("body { color: #222; }")
    os.utime(css, ns=(css.stat().st_atime_ns, css.stat().st_mtime_ns + 1_000_000_000))
    assert serve.collect_static() is True  # a source changed: collected again
    assert (tmp_path / "static" / "css" / "extra.css").read_text() == "body { color: #222; }"
    assert serve.collect_static() is False
    (tmp_path / "static" / ".sources").unlink()
    assert serve.collect_static() is True  # no record of the last run: collected again


def test_the_worker_runs_a_process_per_core(monkeypatch):
    monkeypatch.delenv("NUMAWEB_WORKER_CONCURRENCY", raising=False)
    args = supervisor.worker_command()
    assert "--pool=prefork" in args and f"--concurrency={os.cpu_count()}" in args
    monkeypatch.setenv("NUMAWEB_WORKER_CONCURRENCY", "3")
    assert "--concurrency=3" in supervisor.worker_command()
