"""Throttles that hold against a real deployment (issue 21): two web servers (gunicorn, as `./dev run` starts it)
on one embedded database share the token endpoint's count, and a client rotating X-Forwarded-For is still one
client. Run outside pytest's settings, so the product's cache (the database's table) is what is counted in."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from numaweb.scheduling.management.commands.serve import web_command
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def _post(url: str, body: dict, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _up(base: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=5).close()
            return
        except urllib.error.HTTPError:  # 503: no worker, which these servers do not need
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.3)


def test_two_web_servers_share_the_token_count_and_ignore_forged_forwarding(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(NUMAWEB_DATA_DIR=str(tmp_path / "data"), NUMAWEB_TOKEN_RATE="10/minute", WEB_CONCURRENCY="1",
               GUNICORN_THREADS="2", PYTHONUNBUFFERED="1")
    for args in (["migrate", "--noinput", "-v0"],
                 ["create_user", "vera", "--role", "viewer", "--password", "pw-vera-123"]):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    servers, bases = [], []
    try:
        for i in range(2):
            base, log = f"http://127.0.0.1:{free_port()}", tmp_path / f"web-{i}.log"
            with open(log, "wb") as out:
                servers.append(proc := subprocess.Popen(web_command(base.removeprefix("http://")), cwd=ROOT, env=env,
                                                        stdout=out, stderr=subprocess.STDOUT))
            _up(base, proc, log)
            bases.append(base)
        codes = [_post(bases[i % 2] + "/api/auth-token/", {"username": "vera", "password": "pw-vera-123"},
                       {"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(14)]
        # ten in all, whichever server answered and whatever address the client claimed
        assert codes == [200] * 10 + [429] * 4, codes
    finally:
        for proc in servers:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
            if proc.poll() is None:
                proc.kill()
