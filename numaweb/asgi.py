"""The ASGI application the web server runs (gunicorn with uvicorn's worker, numaweb/gunicorn_conf.py).

An event-loop server parses every request, headers and body, without a thread: a client that trickles its
headers or its body costs a coroutine, and Django's handler reads the whole body (spooled to disk past
FILE_UPLOAD_MAX_MEMORY_SIZE) before a thread runs the view. So slow clients cannot take the threads other users
need (with gunicorn's threads, 8 such connections stalled the site). One bound must come before that read: a
body declared larger than NUMAWEB_MAX_UPLOAD_BYTES is refused with 413 before a byte of it is taken."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.core.asgi import get_asgi_application

from numaweb.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
prepare()

django_application = get_asgi_application()

from django.conf import settings  # noqa: E402  (after Django is set up)

from numaweb.limits import too_large_message  # noqa: E402

# ASGI's three arguments, as Django's handler takes them
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "http":
        limit = settings.NUMAWEB_MAX_UPLOAD_BYTES
        length = dict(scope.get("headers") or ()).get(b"content-length", b"0")
        declared = int(length) if length.isdigit() else 0
        if declared > limit:
            await _refuse(scope, send, 413, too_large_message(declared, limit))
            return
    await django_application(scope, receive, send)


async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    if scope["path"].startswith("/api/"):
        body, kind = json.dumps({"detail": message}).encode(), b"application/json"
    else:
        body, kind = message.encode(), b"text/plain; charset=utf-8"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
