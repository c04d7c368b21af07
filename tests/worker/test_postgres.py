"""PostgreSQL (psycopg 3): migrations and one real session, on a throwaway server this test starts.

Like the Redis fixture, the test needs only the server binaries (Debian's `postgresql` package, which
`./dev test` installs): it runs initdb on a scratch folder with trust auth, starts `postgres` on a free
port of 127.0.0.1 with its socket in that folder, runs `manage.py` against it in subprocesses (the
pytest process itself always uses SQLite, see settings.UNDER_PYTEST), then stops it and deletes the
folder. PostgreSQL refuses to run as root, so under root the server runs as the `postgres` user."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bindir() -> Path:
    """The newest Debian server (/usr/lib/postgresql/N/bin), else the folder of initdb/pg_ctl on PATH."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        def version(path: str) -> tuple[int, ...]:
            return tuple(int(x) for x in re.findall(r"\d+", path.split("/")[-3]))

        return Path(max(found, key=version)).parent
    for name in ("initdb", "pg_ctl"):
        path = shutil.which(name)
        if path:
            return Path(path).resolve().parent
    raise AssertionError("PostgreSQL server binaries are required (apt-get install -y postgresql, or ./dev test)")


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Start a private PostgreSQL server; yields its admin URL (user postgres, trust auth, 127.0.0.1)."""
    bindir = postgres_bindir()
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    # not under pytest's tmp_path: its parents are private to root, the postgres user could not enter them
    base = Path(tempfile.mkdtemp(prefix="numaweb-pg-"))
    data, log = base / "data", base / "server.log"
    if as_root:
        shutil.chown(base, "postgres", "postgres")

    def run(*args: str) -> None:
        done = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, cwd=base)
        assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}{done.stderr}" + (
            log.read_text(errors="replace") if log.exists() else "")

    started = False
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync")
        port = _free_port()
        options = f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
        started = True
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with throwaway_postgres() as url:
        yield url


def test_migrate_and_session_on_postgres(postgres_url, tmp_path):
    base = postgres_url.rsplit("/", 1)[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute('CREATE DATABASE "numaweb"')
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=f"{base}/numaweb", NUMAWEB_DATA_DIR=str(tmp_path))

    def manage(*args: str) -> str:
        done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    manage("migrate", "-v0")
    manage("demo")
    out = manage("run_session", "--cluster", "demo", "--profile", "aligned")
    assert "done;" in out and "numa-test-web-0: node-1" in out
    with psycopg.connect(f"{base}/numaweb") as conn:
        vendor = conn.execute("SELECT version()").fetchone()[0]
        assert vendor.startswith("PostgreSQL")
        scheduled = conn.execute("SELECT count(*) FROM inventory_allocation WHERE origin = 'scheduled'").fetchone()
        assert scheduled[0] >= 5
        status = conn.execute("SELECT status FROM scheduling_schedulingsession").fetchall()
        assert status == [("done",)]
    # nothing was written to SQLite: the subprocesses really ran on the server
    assert not (tmp_path / "numaweb.sqlite3").exists()


def test_pytest_run_ignores_database_url():
    """A DATABASE_URL in the environment moves the product, never the test run, onto a server."""
    from django.conf import settings

    assert settings.UNDER_PYTEST and settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    probe = ("import os, sys, django; {pre}os.environ['DJANGO_SETTINGS_MODULE'] = 'numaweb.settings'; "
             "django.setup(); from django.conf import settings; print(settings.DATABASES['default']['ENGINE'])")
    env = {**os.environ, "DATABASE_URL": "postgresql://someone@db.invalid:5432/prod"}
    engines = [subprocess.run([sys.executable, "-c", probe.format(pre=pre)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=60, check=True).stdout.strip() for pre in ("", "import pytest; ")]
    assert engines == ["django.db.backends.postgresql", "django.db.backends.sqlite3"]


@pytest.mark.parametrize("scenario", ["allocation_race", "session_race"])
def test_integrity_under_concurrency_on_postgres(postgres_url, tmp_path, scenario):
    """The concurrent-writer scenarios of test_integrity.py, on PostgreSQL (row locks instead of SQLite's
    database lock), each on a fresh database."""
    import json

    from tests.worker import test_integrity

    base = postgres_url.rsplit("/", 1)[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{scenario}"')
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DATABASE_URL=f"{base}/{scenario}", NUMAWEB_DATA_DIR=str(tmp_path),
               DJANGO_SETTINGS_MODULE="numaweb.settings")
    for args in (["manage.py", "migrate", "-v0"], ["-m", "tests.worker.integrity_scenarios", scenario]):
        done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    getattr(test_integrity, f"check_{scenario}")(seen)
    assert not (tmp_path / "numaweb.sqlite3").exists()
