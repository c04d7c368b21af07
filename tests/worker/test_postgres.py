"""PostgreSQL (psycopg 3): migrations and one session, in a scratch database on the server named by
DATABASE_URL (default: the local server, postgresql://postgres@127.0.0.1:5432/postgres)."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]


def test_migrate_and_session_on_postgres(tmp_path):
    admin_url = os.environ.get("DATABASE_URL", "").strip()
    if not admin_url.startswith(("postgres://", "postgresql://")):
        admin_url = "postgresql://postgres@127.0.0.1:5432/postgres"
    name = f"numaweb_test_{uuid.uuid4().hex[:10]}"
    base = admin_url.rsplit("/", 1)[0]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
        env.update(DATABASE_URL=f"{base}/{name}", NUMAWEB_DATA_DIR=str(tmp_path))

        def manage(*args: str) -> str:
            done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout

        manage("migrate", "-v0")
        manage("demo")
        out = manage("run_session", "--cluster", "demo", "--profile", "aligned")
        assert "done;" in out and "numa-test-web-0: node-1" in out
        with psycopg.connect(f"{base}/{name}") as conn:
            vendor = conn.execute("SELECT count(*) FROM inventory_allocation WHERE origin = 'scheduled'").fetchone()
            assert vendor[0] >= 5
            status = conn.execute("SELECT status FROM scheduling_schedulingsession").fetchall()
            assert status == [("done",)]
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
