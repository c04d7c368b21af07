"""Bounds on what a request may send.

Request bodies larger than NUMAWEB_MAX_UPLOAD_BYTES are refused with 413 before any byte is read, and chunked
ones (no Content-Length) with 411: Django reads a body by its declared length, so it would see an empty one. The
product's server never lets one through: numaweb.asgi reads a chunked body whole and hands it on with its length;
the 411 is for a WSGI server.

Django bounds form fields (DATA_UPLOAD_MAX_MEMORY_SIZE) but not file parts, and DRF's JSON parser reads
whatever the client sends; checking the declared length first keeps a 500 MB upload from costing the
server 500 MB (the WSGI input stream never yields more than Content-Length, so the check is enough).

JSON bodies nest at most NUMAWEB_MAX_JSON_DEPTH levels (DepthLimitedJSONParser, every JSON endpoint of the API):
Python's decoder recurses once per level, so a body nested 100,000 deep was a RecursionError (500); now it is a
400 naming the limit, whether the decoder gives up first or the parsed value is merely deeper than the limit.
JSON sent as a form field (a multipart upload's `planned_settings`, a page's reserved memory) is held to the same
depth, and a number of more digits than Python reads is a 400 on that field too (JSONField, FormJSONField)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

from csp.utils import build_policy
from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput, JSONString
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, MultiPartParser


def security_headers() -> list[tuple[str, str]]:
    """The headers every answer carries (README "Headers"), for refusals made before the middleware that adds them
    runs: here and in numaweb.asgi, which answers before Django."""
    headers = [("Content-Security-Policy", build_policy()), ("X-Content-Type-Options", "nosniff"),
               ("Referrer-Policy", "same-origin"), ("X-Frame-Options", "DENY")]
    if settings.SECURE_HSTS_SECONDS:
        headers.append(("Strict-Transport-Security", f"max-age={settings.SECURE_HSTS_SECONDS}"))
    return headers


def too_large_message(length: int, limit: int) -> str:
    return (f"the request body of {length} bytes is larger than the limit of {limit} bytes "
            f"({limit / 2**20:g} MiB, NUMAWEB_MAX_UPLOAD_BYTES)")


class RequestSizeLimit:
    """Middleware: 413 (JSON under /api/, text elsewhere) for a declared body over the limit, 411 for a chunked one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            return _refuse(request, 411, "a chunked request body is not accepted: send it with a Content-Length")
        limit = settings.NUMAWEB_MAX_UPLOAD_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            return _refuse(request, 413, too_large_message(length, limit))
        return self.get_response(request)


def _refuse(request: HttpRequest, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": message}, status=status)
    else:
        response = HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    for name, value in security_headers():
        response[name] = value
    return response


def too_deep_message(limit: int) -> str:
    return f"JSON parse error - nested deeper than {limit} levels (NUMAWEB_MAX_JSON_DEPTH)"


def deeper_than(value: object, limit: int) -> bool:
    """True when `value` nests lists or objects more than `limit` levels deep (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in item if isinstance(child, dict | list))
    return False


class DepthLimitedJSONParser(JSONParser):
    """JSONParser refusing bodies nested deeper than NUMAWEB_MAX_JSON_DEPTH with a 400."""

    def parse(self, stream: IO[Any], media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        limit = settings.NUMAWEB_MAX_JSON_DEPTH
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(too_deep_message(limit)) from None
        if deeper_than(data, limit):
            raise ParseError(too_deep_message(limit))
        return data


class StrictMultiPartParser(MultiPartParser):
    """MultiPartParser refusing a body that is not a form: Django's parser reads a body with no part in it (no
    boundary line, e.g. a bare number) as an empty form, so a PATCH would succeed having changed nothing. A body
    longer than an empty form (just its closing boundary) that yields no field and no file is a 400."""

    def parse(self, stream: IO[Any], media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        request = (parser_context or {}).get("request")
        meta = getattr(request, "META", {}) if request is not None else {}
        length = int(meta.get("CONTENT_LENGTH") or 0)
        boundary = (media_type or "").partition("boundary=")[2].split(";")[0].strip().strip('"')
        if 0 < length <= 4096:  # a short body is read first: it must hold its boundary somewhere
            body = stream.read()
            if b"--" + boundary.encode() not in body:
                raise ParseError("the body is not a multipart form: no part was found in it")
            stream = io.BytesIO(body)
        parsed = super().parse(stream, media_type, parser_context)
        if not parsed.data and not parsed.files and length > len(boundary) + 8:
            raise ParseError("the body is not a multipart form: no part was found in it")
        return parsed


def load_json_field(text: str | bytes) -> Any:
    """A form field's JSON text, parsed with the body's bounds; ValueError with the reason (invalid JSON, nested
    deeper than NUMAWEB_MAX_JSON_DEPTH, a number of too many digits) for the field's error."""
    limit = settings.NUMAWEB_MAX_JSON_DEPTH
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {limit} levels (NUMAWEB_MAX_JSON_DEPTH)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise ValueError(f"a number has more than {sys.get_int_max_str_digits()} digits") from None
        raise
    if deeper_than(value, limit):
        raise ValueError(f"nested deeper than {limit} levels (NUMAWEB_MAX_JSON_DEPTH)")
    return value


class JSONField(serializers.JSONField):
    """DRF's JSONField whose text (a form or multipart field, or `binary`) is read by load_json_field: nesting
    and huge numbers are a 400 on the field, not a RecursionError or ValueError (500)."""

    def to_internal_value(self, data: Any) -> Any:
        if self.binary or getattr(data, "is_json_string", False):
            try:
                return load_json_field(data)
            except (TypeError, ValueError) as exc:
                raise serializers.ValidationError(str(exc)) from None
        return super().to_internal_value(data)


class FormJSONField(forms.JSONField):
    """Django's form JSONField, read by load_json_field (Django's catches only syntax errors, in both places it
    parses: the value, and the text shown again with the form's errors)."""

    def to_python(self, value: Any) -> Any:
        if self.disabled or value in self.empty_values or not isinstance(value, str) or isinstance(
                value, JSONString):
            return super().to_python(value)
        try:
            converted = load_json_field(value)
        except ValueError as exc:
            raise ValidationError(str(exc), code="invalid") from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled or data is None:
            return super().bound_data(data, initial)
        try:
            return load_json_field(data)
        except ValueError:
            return InvalidJSONInput(data)
