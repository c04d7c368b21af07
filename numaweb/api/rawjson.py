"""Stored JSON documents served as they are stored: read as text, spliced into the answer, never decoded.

A node's topology document is about 21 KB of JSON at 5,000 nodes (an entry per CPU); a page of 100 nodes
decoded 2.1 MB of it into Python objects only to encode them again, which was most of the page's CPU time.
A list reads the column as text (`<field>_text`, see `StoredObjectField`) and the field hands the renderer a
`RawJSON`; the renderer writes a placeholder for it and puts the text in its place. The document is the same
JSON (the database keeps it valid: a CHECK on SQLite, jsonb on PostgreSQL); only its spacing may differ from
the re-encoded form. The placeholder carries a random key per answer, so no text stored by a user can pose as
one."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

#: the answer being rendered: its random key and the texts its placeholders stand for
_PENDING: ContextVar[tuple[str, list[str]] | None] = ContextVar("rawjson_pending", default=None)


class RawJSON:
    """A JSON document's text, to be written into an answer as it is."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class Encoder(JSONEncoder):
    """DRF's encoder; a RawJSON becomes a placeholder string (decoded instead when no renderer splices it)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, RawJSON):
            pending = _PENDING.get()
            if pending is None:
                return json.loads(o.text)
            pending[1].append(o.text)
            return f"\0{pending[0]}:{len(pending[1]) - 1}\0"
        return super().default(o)


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer, which writes each RawJSON's text where its placeholder is."""

    encoder_class = Encoder

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        pending: tuple[str, list[str]] = (secrets.token_hex(8), [])
        token = _PENDING.set(pending)
        try:
            out: bytes = super().render(data, accepted_media_type, renderer_context)
        finally:
            _PENDING.reset(token)
        key, texts = pending
        if not texts:
            return out
        # a placeholder as the encoder writes a string holding NUL: "\u0000<key>:<n>\u0000"
        placeholder = re.compile(rb'"\\u0000' + key.encode() + rb":(\d+)\\u0000\"")
        # as DRF's renderer does for the rest of the answer: the two line separators escaped (JavaScript)
        raw = [t.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode() for t in texts]
        return placeholder.sub(lambda m: raw[int(m[1])], out)


class StoredText:
    """For a JSON serializer field: the stored text, when the queryset annotated it as `<source>_text`, is served
    as it is (RawJSON); otherwise (one object: a detail, a write's answer) as the field serves any value."""

    def get_attribute(self, instance: Any) -> Any:
        text = getattr(instance, f"{getattr(self, 'source', '')}_text", None)
        if isinstance(text, str):
            return RawJSON(text)
        return super().get_attribute(instance)  # type: ignore[misc]

    def to_representation(self, value: Any) -> Any:
        return value if isinstance(value, RawJSON) else super().to_representation(value)  # type: ignore[misc]
