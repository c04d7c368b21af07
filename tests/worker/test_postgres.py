"""PostgreSQL (psycopg 3): migrations and one real session, on a throwaway server this test starts.

Like the Redis fixture, the test needs only the server binaries (Debian's `postgresql` package, which
`./dev test` installs): it runs initdb on a scratch folder with trust auth, starts `postgres` on a free
port of 127.0.0.1 with its socket in that folder, runs `manage.py` against it in subprocesses (the
pytest process itself always uses SQLite, see settings.UNDER_PYTEST), then stops it and deletes the
folder. PostgreSQL refuses to run as root, so under root the server runs as the `postgres` user."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.servers import throwaway_postgres

ROOT = Path(__file__).resolve().parents[2]


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
    out = manage("run_session", "--cluster", "demo", "--profile", "aligned", "--all")
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


@pytest.mark.parametrize("scenario", ["allocation_race", "session_race", "job_create_race", "cluster_create_race",
                                      "finish_race"])
def test_integrity_under_concurrency_on_postgres(postgres_url, tmp_path, scenario):
    """The concurrent-writer scenarios of test_integrity.py, on PostgreSQL (row locks instead of SQLite's
    database lock), each on a fresh database."""
    import json

    from tests.worker import test_integrity

    base = postgres_url.rsplit("/", 1)[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{scenario}"')
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    # the scenarios drive the API with Django's test client, whose requests name the host `testserver`
    env.update(DATABASE_URL=f"{base}/{scenario}", NUMAWEB_DATA_DIR=str(tmp_path),
               DJANGO_SETTINGS_MODULE="numaweb.settings", DJANGO_ALLOWED_HOSTS="testserver")
    for args in (["manage.py", "migrate", "-v0"], ["-m", "tests.worker.integrity_scenarios", scenario]):
        done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    getattr(test_integrity, f"check_{scenario}")(seen)
    assert not (tmp_path / "numaweb.sqlite3").exists()
