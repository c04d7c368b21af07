"""The OpenAPI schema states every answer an operation can give, not only its success.

drf-spectacular documents what a view declares; the answers that come from the framework around the view
are the same for every operation, so one postprocessing hook (SPECTACULAR_SETTINGS) adds them from what
each operation is: 401 and 403 wherever a login is needed (numaweb.access.drf), 404 for a path with an id
or a page past the last (ids in paths are whole numbers from 1), 400 for a body or query parameters, 411
and 413 for a body (numaweb.limits), 429 for a write (numaweb.access.throttles). A response a view declared keeps
its schema; one declared with a description only gets the generic body.
New endpoints are covered without a change here."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request

from numaweb import compression

ERROR = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"],
         "description": "the reason, in words"}
INVALID = {"type": "object", "additionalProperties": {},
           "description": "each field or parameter refused, with its reasons (`non_field_errors` for the whole "
                          "input); `detail` when the reason is not tied to one field"}
WRITES = {"post", "put", "patch", "delete"}

GENERIC = {
    "400": ("the input was refused: each field or parameter named with its reasons", "InvalidInput"),
    "401": ("no credentials, or an unknown token (`Authorization: Token <key>` or a login session)", "Error"),
    "403": ("the user's role lacks the permission this operation needs", "Error"),
    "404": ("no object with this id, or a page past the last", "Error"),
    "411": ("a chunked request body (no Content-Length): send the body with its length", "Error"),
    "413": ("the request body is larger than NUMAWEB_MAX_UPLOAD_BYTES (refused before it is read)", "Error"),
    "429": ("too many requests: the write rate (NUMAWEB_API_WRITE_RATE) or, for a token, failed logins "
            "(django-axes) or NUMAWEB_TOKEN_RATE; `Retry-After` says when to try again", "Error"),
}
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}}


def statuses(method: str, path: str, operation: dict) -> list[str]:
    """The framework's answers this operation can give, from its method, path, parameters and security."""
    query = [p for p in operation.get("parameters", []) if p.get("in") == "query"]
    out = []
    if operation.get("requestBody") or query:
        out.append("400")
    if any(operation.get("security") or ()):  # none, [] and [{}] all say: open
        out += ["401", "403"]
    if "{" in path or any(p["name"] == "page" for p in query):
        out.append("404")
    if operation.get("requestBody"):
        out += ["411", "413"]
    if method in WRITES:
        out.append("429")
    return out


def document_statuses(result: dict[str, Any], generator: SchemaGenerator, request: Request | None,
                      public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: add every framework answer, with its body, to each operation."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", ERROR)
    schemas.setdefault("InvalidInput", INVALID)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            for param in operation.get("parameters", []):
                if param["in"] == "path" and param.get("schema", {}).get("type") == "integer":
                    param["schema"].setdefault("minimum", 1)  # database ids start at 1
            responses = operation.setdefault("responses", {})
            for code in statuses(method, path, operation):
                description, component = GENERIC[code]
                response = responses.setdefault(code, {"description": description})
                response.setdefault("content", {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{component}"}}})
            if "429" in responses:  # the framework's, or one a view declares (headroom's busy answer)
                responses["429"].setdefault("headers", RETRY_AFTER)
    return result


_GENERATING = threading.Lock()


class SchemaView(SpectacularAPIView):
    """`/api/schema/`: the OpenAPI document, generated once per process for each of what it varies by (the
    `lang` and `version` query parameters drf-spectacular reads, and the format asked for: YAML or JSON, by
    `Accept` or `?format=`), not per request (330 KB, about 100 ms of CPU each time). It depends on code and
    settings only: the user is not read (the document is public: SERVE_PUBLIC), and a settings change in a test
    empties the cache (`setting_changed`). Sent gzip-compressed to a client that accepts it (kept compressed
    too); `Vary: Accept, Accept-Encoding`."""

    #: (lang, version, media type) → (body, gzip'd body, content type, content disposition); at most LIMIT
    documents: ClassVar[dict[tuple[str, str, str], tuple[bytes, bytes, str, str]]] = {}
    LIMIT = 16

    @extend_schema(exclude=True)  # as drf-spectacular's own view (SERVE_INCLUDE_SCHEMA)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        # the raw `version` parameter: at least as fine a key as the version drf-spectacular takes from it
        key = (request.GET.get("lang") or "", request.GET.get("version") or "", str(request.accepted_media_type))
        with _GENERATING:  # drf-spectacular's first generation is not thread-safe (its extensions load lazily)
            document = self.documents.get(key) or self._generate(request, key, *args, **kwargs)
        body, packed, content_type, disposition = document
        out = HttpResponse(body, content_type=content_type)
        out["Content-Disposition"] = disposition
        patch_vary_headers(out, ("Accept", "Accept-Encoding"))
        if compression.accepts_gzip(request):
            out.content = packed
            out["Content-Encoding"] = "gzip"
        return out

    def _generate(self, request: Request, key: tuple[str, str, str], *args: Any,
                  **kwargs: Any) -> tuple[bytes, bytes, str, str]:
        """Generate the document for `key` and keep it (under _GENERATING)."""
        response = super().get(request, *args, **kwargs)  # type: ignore[no-untyped-call]
        response.accepted_renderer = request.accepted_renderer
        response.accepted_media_type = request.accepted_media_type
        response.renderer_context = self.get_renderer_context()
        body = bytes(response.render().content)
        document = (body, compression.gzipped(body), response["Content-Type"], response["Content-Disposition"])
        if len(self.documents) >= self.LIMIT:  # a bounded cache: any query string is a key
            self.documents.pop(next(iter(self.documents)))
        self.documents[key] = document
        return document


@receiver(setting_changed)
def _forget_schemas(**kwargs: Any) -> None:
    SchemaView.documents.clear()
