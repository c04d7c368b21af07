"""Request bodies larger than NUMAWEB_MAX_UPLOAD_BYTES are refused with 413 before any byte is read.

Django bounds form fields (DATA_UPLOAD_MAX_MEMORY_SIZE) but not file parts, and DRF's JSON parser reads
whatever the client sends; checking the declared length first keeps a 500 MB upload from costing the
server 500 MB (the WSGI input stream never yields more than Content-Length, so the check is enough)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


def too_large_message(length: int, limit: int) -> str:
    return (f"the request body of {length} bytes is larger than the limit of {limit} bytes "
            f"({limit / 2**20:g} MiB, NUMAWEB_MAX_UPLOAD_BYTES)")


class RequestSizeLimit:
    """Middleware: 413 (JSON under /api/, text elsewhere) for a declared body over the limit."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.NUMAWEB_MAX_UPLOAD_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            message = too_large_message(length, limit)
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message}, status=413)
            return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
