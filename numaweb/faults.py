"""Storage faults answer 503, not 500: a full disk (or database) is the service's state, not a bug, and the
client may try again later. Whatever the request was writing is rolled back with its transaction, so nothing
is half-written; reads of what is stored keep working where the database can answer them."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger("numaweb.faults")

RETRY_AFTER_SECONDS = 60
MESSAGE = "the server's storage is full: nothing was written; try again later"
#: what SQLite (SQLITE_FULL) and PostgreSQL (SQLSTATE 53100 disk_full, or a failed file extension) say
_DATABASE_FULL = ("database or disk is full", "no space left on device", "could not extend file", "disk full")


def storage_full(exc: BaseException | None) -> bool:
    """A full disk or database behind `exc` (or the exception it was raised from)."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(exc, "sqlstate", None) == "53100":  # psycopg's DiskFull, under Django's OperationalError
            return True
        if isinstance(exc, DatabaseError) and any(m in str(exc).lower() for m in _DATABASE_FULL):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class StorageFaults:
    """Middleware: a view that fails because storage is full answers 503 with Retry-After (JSON under /api/)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not storage_full(exc):
            return None
        log.error("storage full during %s %s: %s", request.method, request.path, exc)
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"detail": MESSAGE}, status=503)
        else:
            response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
