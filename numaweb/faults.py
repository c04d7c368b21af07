"""Outages answer 503 with Retry-After, not 500: a full disk (or database), a database that cannot be reached or
fails to read its file, a Redis that is down are the service's state, not a bug, and the client may try again
later. Whatever the request was writing is rolled back with its transaction, so nothing is half-written; reads of
what is stored keep working where the database can answer them.

Two places catch them: `StorageFaults.process_exception` for a view, and `server_error` (the project's handler500)
for anything before the view, e.g. the session middleware reading a database that is down."""

from __future__ import annotations

import errno
import logging
import sys
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger("numaweb.faults")

RETRY_AFTER_SECONDS = 60  # a full disk needs someone to make room
OUTAGE_RETRY_AFTER_SECONDS = 15  # a database or Redis restarting is back sooner
MESSAGE = "the server's storage is full: nothing was written; try again later"
DATABASE_MESSAGE = "the database cannot be reached or read: nothing was written; try again later"
CACHE_MESSAGE = "the shared cache (Redis) cannot be reached: nothing was written; try again later"
#: what SQLite (SQLITE_FULL) and PostgreSQL (SQLSTATE 53100 disk_full, or a failed file extension) say
_DATABASE_FULL = ("database or disk is full", "no space left on device", "could not extend file", "disk full")
#: OperationalErrors that are the code's fault (an unmigrated table, a wrong column): those stay 500
_NOT_AN_OUTAGE = ("no such table", "no such column", "syntax error", "does not exist")


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def storage_full(exc: BaseException | None) -> bool:
    """A full disk or database behind `exc` (or the exception it was raised from)."""
    for item in _chain(exc):
        if isinstance(item, OSError) and item.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(item, "sqlstate", None) == "53100":  # psycopg's DiskFull, under Django's OperationalError
            return True
        if isinstance(item, DatabaseError) and any(m in str(item).lower() for m in _DATABASE_FULL):
            return True
    return False


def outage(exc: BaseException | None) -> tuple[str, int] | None:
    """The message and Retry-After for an outage behind `exc`: a full disk, the database unreachable or failing
    to read (PostgreSQL down, SQLite's "disk I/O error"), Redis unreachable; None for anything else."""
    if storage_full(exc):
        return MESSAGE, RETRY_AFTER_SECONDS
    for item in _chain(exc):
        if isinstance(item, RedisConnectionError | RedisTimeoutError):
            return CACHE_MESSAGE, OUTAGE_RETRY_AFTER_SECONDS
        if isinstance(item, InterfaceError) or (
                isinstance(item, OperationalError) and not any(m in str(item).lower() for m in _NOT_AN_OUTAGE)):
            return DATABASE_MESSAGE, OUTAGE_RETRY_AFTER_SECONDS
    return None


def unavailable(request: HttpRequest, message: str, retry_after: int) -> HttpResponse:
    """503 with Retry-After: JSON under /api/, text elsewhere (no template: the database may be what failed)."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": message}, status=503)
    else:
        response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(retry_after)
    return response


class StorageFaults:
    """Middleware: a view that fails because of an outage answers 503 with Retry-After (JSON under /api/)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        found = outage(exc)
        if found is None:
            return None
        log.error("outage during %s %s: %s", request.method, request.path, exc)
        return unavailable(request, *found)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: an outage raised outside a view (a middleware reading the session, the throttle's cache) is a
    503 like one inside it; anything else is Django's 500 (JSON under /api/)."""
    found = outage(sys.exc_info()[1])
    if found is not None:
        return unavailable(request, *found)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "A server error occurred."}, status=500)
    return defaults.server_error(request)
