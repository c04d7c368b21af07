"""The API's JSON answers, gzip-compressed for a client that accepts it (`Accept-Encoding: gzip`).

Only what the API answers to a GET: JSON (and the OpenAPI document) under `/api/`, none of the HTML pages.
A page carries the CSRF token of its forms, and a compressed page that also reflects what a request sent
lets an attacker who can watch its size guess the token a byte at a time (BREACH); the API's JSON carries no
such token, and an answer to a GET is data the caller could read anyway. Streamed answers (the explanation
download) are left as they are, as is an answer already encoded (the schema view keeps its own compressed
copy). A node's topology document repeats itself, so a page of 100 nodes goes from 2.1 MB to about a tenth."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers

#: what is compressed: JSON, and the OpenAPI document in either of its formats
TYPES = ("application/json", "application/vnd.oai.openapi", "application/yaml")
#: below this the gzip header and the extra work outweigh what is saved
SMALLEST = 1024
#: zlib's level (its default): a page of 100 nodes 2.5 MB → 36 KB in 17 ms of CPU, where level 1 leaves 178 KB
LEVEL = 6
_GZIP = re.compile(r"\bgzip\b")


def accepts_gzip(request: HttpRequest) -> bool:
    return bool(_GZIP.search(request.META.get("HTTP_ACCEPT_ENCODING", "")))


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=LEVEL, mtime=0)


class CompressApiJson:
    """Middleware: an API GET's JSON answer, gzip-compressed when the client accepts it (`Vary: Accept-Encoding`
    either way, so that a cache keeps both)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (request.method not in ("GET", "HEAD") or not request.path.startswith("/api/") or response.streaming
                or response.has_header("Content-Encoding")
                or not response.get("Content-Type", "").startswith(TYPES) or len(response.content) < SMALLEST):
            return response
        patch_vary_headers(response, ("Accept-Encoding",))
        if not accepts_gzip(request):
            return response
        body = gzipped(response.content)
        if len(body) >= len(response.content):
            return response
        response.content = body
        response["Content-Length"] = str(len(body))
        response["Content-Encoding"] = "gzip"
        etag = response.get("ETag")
        if etag and etag.startswith('"'):
            response["ETag"] = "W/" + etag  # the bytes differ from the identity answer's
        return response
