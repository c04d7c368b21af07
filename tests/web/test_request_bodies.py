"""What a request body may cost (issue 37 rows 2 and 12): past NUMAWEB_BODY_MEMORY_BYTES it is spooled to disk, the
whole of it must arrive within NUMAWEB_BODY_SECONDS (else 408), and the refusals made before the middleware (411,
413, 408) carry the security headers every answer carries."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

SECURITY = ("content-security-policy", "x-content-type-options", "referrer-policy", "x-frame-options")


def _run(scope: dict, receive: Any) -> list[dict]:
    from numaweb.asgi import application

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    with ThreadPoolExecutor(1) as pool:  # an event loop of its own (the browser tests may leave one running here)
        pool.submit(lambda: asyncio.run(application(scope, receive, send))).result()
    return sent


def _scope(path: str, length: int) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"localhost"), (b"content-length", str(length).encode()),
                        (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}


def test_a_body_that_stops_arriving_is_dropped_with_408(settings):
    """Issue 37 row 2: a client that sent part of its body and stopped held it (in memory) with no time limit."""
    settings.NUMAWEB_BODY_SECONDS = 1
    calls = 0

    async def receive() -> dict:
        nonlocal calls
        calls += 1
        if calls == 1:
            return {"type": "http.request", "body": b"x" * 1000, "more_body": True}
        await asyncio.sleep(3600)  # the rest never comes
        raise AssertionError

    sent = _run(_scope("/api/jobs/", 100_000), receive)
    start, body = sent[0], sent[1]
    assert start["status"] == 408, sent
    headers = dict(start["headers"])
    assert all(name.encode() in headers for name in SECURITY), headers
    assert json.loads(body["body"]) == {"detail": "the request body did not arrive within 1 s (NUMAWEB_BODY_SECONDS)"}


def test_a_body_in_time_is_answered_by_the_view(settings):
    settings.NUMAWEB_BODY_SECONDS = 5
    chunks = [b'{"a": ', b'"b"}']

    async def receive() -> dict:
        if chunks:
            part = chunks.pop(0)
            return {"type": "http.request", "body": part, "more_body": bool(chunks)}
        await asyncio.sleep(3600)  # Django listens for a disconnect while the view runs
        raise AssertionError

    sent = _run(_scope("/healthz", 10), receive)  # a view that needs no database (this test holds its own)
    # Django had the body and answered (the CSRF check, before any view), within the time
    assert sent[0]["status"] == 403 and b"CSRF" in sent[1]["body"], sent


def test_bodies_past_a_small_size_are_spooled_to_disk(settings):
    """Django keeps a body in memory up to FILE_UPLOAD_MAX_MEMORY_SIZE: it was the upload limit (16 MiB), so 120
    clients sending 16 MiB and stopping took 1.9 GB; now it is NUMAWEB_BODY_MEMORY_BYTES (256 KiB)."""
    from numaweb.asgi import django_application

    assert settings.FILE_UPLOAD_MAX_MEMORY_SIZE == 256 * 1024
    parts = [b"x" * 65536] * 8

    async def receive() -> dict:
        return {"type": "http.request", "body": parts.pop(), "more_body": bool(parts)}

    async def read() -> Any:
        return await django_application.read_body(receive)

    with ThreadPoolExecutor(1) as pool:
        spooled = pool.submit(lambda: asyncio.run(read())).result()
    try:
        assert spooled._rolled and spooled.read() == b"x" * 65536 * 8  # on disk, whole
    finally:
        spooled.close()


def test_early_413_carries_the_security_headers(settings):
    settings.NUMAWEB_MAX_UPLOAD_BYTES = 1000

    async def receive() -> dict:
        raise AssertionError("the body was read")

    start = _run(_scope("/login/", 5000), receive)[0]
    assert start["status"] == 413
    headers = dict(start["headers"])
    assert all(name.encode() in headers for name in SECURITY), headers
    assert b"frame-ancestors 'none'" in headers[b"content-security-policy"]


@pytest.mark.parametrize("chunked", [True, False], ids=["411", "413"])
def test_the_middlewares_refusals_carry_them_too(client, settings, chunked):
    settings.NUMAWEB_MAX_UPLOAD_BYTES = 10
    extra = {"HTTP_TRANSFER_ENCODING": "chunked"} if chunked else {}
    response = client.post("/api/jobs/", {"name": "x" * 100}, content_type="application/json", **extra)
    assert response.status_code == (411 if chunked else 413)
    assert response["X-Frame-Options"] == "DENY" and response["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'self'" in response["Content-Security-Policy"] and response["Referrer-Policy"] == "same-origin"
