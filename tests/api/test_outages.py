"""Outages answer 503 with Retry-After everywhere, never 500 (issue 37 row 8): Redis down (the write throttle and
the token endpoint count in it), PostgreSQL down (a real server pointed at a port nothing listens on), SQLite's
"disk I/O error" (raised by the driver under the view and under the session middleware)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db.backends.sqlite3 import base as sqlite_base
from rest_framework.test import APIClient

from numaweb.faults import CACHE_MESSAGE, DATABASE_MESSAGE
from tests.servers import free_port, product_web_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def redis_down(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}


def test_redis_down_throttled_writes_and_the_token_endpoint_answer_503(api, make_user, redis_down):
    write = api.post("/api/clusters/", {"name": "c1"}, format="json")
    assert write.status_code == 503 and write["Retry-After"] == "15", write.content
    assert write.json() == {"detail": CACHE_MESSAGE}
    make_user("olga", "operator")
    token = APIClient().post("/api/auth-token/", {"username": "olga", "password": "pw-olga-123"})
    assert token.status_code == 503 and token["Retry-After"] == "15" and token.json() == {"detail": CACHE_MESSAGE}
    assert api.get("/api/clusters/").status_code == 200  # reads are not throttled: they keep working


@pytest.fixture
def disk_io_error(monkeypatch):
    def failing(self, query, params=None):
        raise sqlite3.OperationalError("disk I/O error")

    with monkeypatch.context() as patch:  # undone before the other fixtures clean up the database
        yield lambda: patch.setattr(sqlite_base.SQLiteCursorWrapper, "execute", failing)


def test_sqlite_disk_io_error_answers_503_in_views_and_in_middleware(api, client, disk_io_error):
    client.raise_request_exception = False
    disk_io_error()
    answer = api.get("/api/clusters/")  # the token is looked up in the view (DRF)
    assert answer.status_code == 503 and answer["Retry-After"] == "15"
    assert answer.json() == {"detail": DATABASE_MESSAGE}
    page = client.get("/")  # the session is read by its middleware, before any view
    assert page.status_code == 503 and page["Retry-After"] == "15"
    assert page.content.decode() == DATABASE_MESSAGE


def test_a_missing_table_is_still_a_bug_not_an_outage():
    from django.db import OperationalError

    from numaweb.faults import outage

    assert outage(OperationalError("no such table: jobs_job")) is None
    assert outage(OperationalError("disk I/O error")) == (DATABASE_MESSAGE, 15)
    assert outage(RuntimeError("x")) is None


def _call(url: str, body: dict | None = None, token: str = "", cookie: str = "") -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Token {token}"} if token else {}),
               **({"Cookie": cookie} if cookie else {})}
    request = urllib.request.Request(url, json.dumps(body).encode() if body is not None else None, headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_postgresql_down_answers_503_with_retry_after(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "REDIS_URL")}
    env.update(NUMAWEB_DATA_DIR=str(tmp_path / "data"), WEB_CONCURRENCY="1", PYTHONUNBUFFERED="1",
               DATABASE_URL=f"postgres://numaweb@127.0.0.1:{free_port()}/numaweb")
    assert subprocess.run([sys.executable, "-c", "pass"], env=env).returncode == 0
    with product_web_server(env, tmp_path / "web.log") as base:
        for url, body, token, cookie in (
                (base + "/api/auth-token/", {"username": "a", "password": "b"}, "", ""),  # its throttle's table
                (base + "/api/clusters/", None, "0" * 40, ""),  # the token's row
                (base + "/", None, "", "sessionid=" + "a" * 32)):  # the session, read by its middleware
            status, headers, content = _call(url, body, token, cookie)
            assert status == 503 and headers["Retry-After"] == "15", (url, status, content[:300])
        health, _, _ = _call(base + "/healthz")
        assert health == 503
