"""The ASGI application the web server runs (gunicorn with uvicorn's worker, numaweb/gunicorn_conf.py).

An event-loop server parses every request, headers and body, without a thread: a client that trickles its
headers or its body costs a coroutine, and Django's handler reads the whole body before a thread runs the view.
So slow clients cannot take the threads other users need (with gunicorn's threads, 8 such connections stalled
the site). What a body may cost is bounded before and while it is read:

- a body declared larger than NUMAWEB_MAX_UPLOAD_BYTES is refused with 413 before a byte of it is taken; one
  sent in chunks, without a length, is read here up to that limit (413 past it) and handed on with its length;
- past FILE_UPLOAD_MAX_MEMORY_SIZE (NUMAWEB_BODY_MEMORY_BYTES, 256 KiB) Django spools it to a temporary file, so
  120 clients sending 16 MiB and stopping hold disk, not 2 GB of memory;
- the whole body must arrive within NUMAWEB_BODY_SECONDS of the request's start, else the request is dropped
  and answered 408 (with the headers every answer carries): a connection that stops mid-body does not hold its
  file and coroutine for ever."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from typing import IO, Any

from django.core.asgi import get_asgi_application

from numaweb.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
prepare()

django_application = get_asgi_application()

from django.conf import settings  # noqa: E402  (after Django is set up)

from numaweb.limits import security_headers, too_large_message  # noqa: E402

# ASGI's three arguments, as Django's handler takes them
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        await django_application(scope, receive, send)
        return
    limit = settings.NUMAWEB_MAX_UPLOAD_BYTES
    length = dict(scope.get("headers") or ()).get(b"content-length", b"0")
    declared = int(length) if length.isdigit() else 0
    if declared > limit:
        await _refuse(scope, send, 413, too_large_message(declared, limit))
        return
    body = BodyDeadline(receive, settings.NUMAWEB_BODY_SECONDS)
    receive_body = body.receive
    if b"chunked" in dict(scope.get("headers") or ()).get(b"transfer-encoding", b"").lower():
        try:
            whole = await ChunkedBody.read(body.receive, limit)
        except ChunkedBody.TooLarge:
            await _refuse(scope, send, 413, f"the request body is larger than the limit of {limit} bytes "
                                            "(NUMAWEB_MAX_UPLOAD_BYTES)")
            return
        if whole is not None:  # else the client left, or was too slow (Django then sees the disconnect)
            scope, receive_body = whole.scope(scope), whole.receive
    await django_application(scope, receive_body, send)
    if body.late:  # Django saw a disconnect and answered nothing: the client is still there, tell it why
        await _refuse(scope, send, 408, f"the request body did not arrive within {settings.NUMAWEB_BODY_SECONDS} s "
                                        "(NUMAWEB_BODY_SECONDS)")


class BodyDeadline:
    """`receive` for Django: the body's messages until `seconds` after the first call, then a disconnect (Django
    drops the request; `late` says why). Once the body is complete, messages pass through untimed."""

    def __init__(self, receive: Receive, seconds: float) -> None:
        self._receive, self._seconds = receive, seconds
        self._deadline: float | None = None
        self._complete = False
        self.late = False

    async def receive(self) -> Mapping[str, Any]:
        if self._complete:
            return await self._receive()
        if self._deadline is None:
            self._deadline = asyncio.get_running_loop().time() + self._seconds
        try:
            async with asyncio.timeout_at(self._deadline):  # no task per message, unlike wait_for
                message = await self._receive()
        except TimeoutError:
            self.late = True
            return {"type": "http.disconnect"}
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._complete = True
        return message


class ChunkedBody:
    """A body sent without a length (Transfer-Encoding: chunked), read whole here, so that Django and DRF, which
    read a body by its declared length, see all of it: held in a file past FILE_UPLOAD_MAX_MEMORY_SIZE (as
    Django holds a body), given on with its Content-Length; larger than the limit, it is refused with 413."""

    PIECE = 64 * 1024

    class TooLarge(Exception):
        pass

    def __init__(self, file: IO[bytes], length: int, receive: Receive) -> None:
        self._file, self._length, self._after = file, length, receive
        self._sent = False

    @classmethod
    async def read(cls, receive: Receive, limit: int) -> ChunkedBody | None:
        """The whole body; None when the client went away (or was too slow); TooLarge past `limit` bytes."""
        # handed on with the body, closed once replayed (or here, when refused)
        file = tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE)  # noqa: SIM115
        length = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                file.close()
                return None
            chunk = message.get("body", b"")
            length += len(chunk)
            if length > limit:
                file.close()
                raise cls.TooLarge
            file.write(chunk)
            if not message.get("more_body", False):
                file.seek(0)
                return cls(file, length, receive)

    def scope(self, scope: Scope) -> Scope:
        headers = [(k, v) for k, v in scope.get("headers") or () if k not in (b"transfer-encoding", b"content-length")]
        return {**scope, "headers": [*headers, (b"content-length", str(self._length).encode())]}

    async def receive(self) -> Mapping[str, Any]:
        if self._sent:
            return await self._after()
        piece = self._file.read(self.PIECE)
        more = self._file.tell() < self._length
        if not more:
            self._sent = True
            self._file.close()
        return {"type": "http.request", "body": piece, "more_body": more}


async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    if scope["path"].startswith("/api/"):
        body, kind = json.dumps({"detail": message}).encode(), b"application/json"
    else:
        body, kind = message.encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    headers += [(name.lower().encode(), value.encode()) for name, value in security_headers()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
