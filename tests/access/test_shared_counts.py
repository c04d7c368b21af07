"""Throttles that hold against a real deployment (issue 21): two web servers (gunicorn, as `./dev run` starts it)
on one embedded database share the token endpoint's count, and a client rotating X-Forwarded-For is still one
client. Run outside pytest's settings, so the product's cache (the database's table) is what is counted in."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.servers import product_web_server

ROOT = Path(__file__).resolve().parents[2]


def _post(url: str, body: dict, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_two_web_servers_share_the_token_count_and_ignore_forged_forwarding(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(NUMAWEB_DATA_DIR=str(tmp_path / "data"), NUMAWEB_TOKEN_RATE="10/minute", WEB_CONCURRENCY="1",
               PYTHONUNBUFFERED="1")
    for args in (["migrate", "--noinput", "-v0"],
                 ["create_user", "vera", "--role", "viewer", "--password", "pw-vera-123"]):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    with contextlib.ExitStack() as stack:
        bases = [stack.enter_context(product_web_server(env, tmp_path / f"web-{i}.log")) for i in range(2)]
        codes = [_post(bases[i % 2] + "/api/auth-token/", {"username": "vera", "password": "pw-vera-123"},
                       {"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(14)]
    # ten in all, whichever server answered and whatever address the client claimed
    assert codes == [200] * 10 + [429] * 4, codes
