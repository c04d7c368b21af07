"""Hostile request bodies (issue 21): JSON nested 100,000 levels deep answers 400 naming the limit on every JSON
write operation of the API (and the token endpoint); a chunked body is refused with 411 instead of read as empty."""

import json

import pytest
from drf_spectacular.generators import SchemaGenerator

from numaweb.limits import deeper_than
from tests.access.test_matrix import _url, objects  # noqa: F401  (one of everything, and paths with their ids)
from tests.measure import MiB, measure

DEEP = "[" * 100_000 + "]" * 100_000
LIMIT_MESSAGE = "JSON parse error - nested deeper than 64 levels (NUMAWEB_MAX_JSON_DEPTH)"


def json_writes() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(public=True)
    return sorted((method.upper(), path) for path, item in schema["paths"].items() for method, op in item.items()
                  if method in ("post", "put", "patch") and "application/json" in op.get("requestBody", {})
                  .get("content", {}))


def test_the_schema_lists_the_json_writes():
    found = json_writes()
    assert ("POST", "/api/jobs/") in found and ("POST", "/api/sessions/") in found and len(found) >= 8


@pytest.mark.parametrize(("method", "path"), json_writes())
def test_deep_json_is_400_naming_the_limit(api, objects, method, path):  # noqa: F811
    url = _url(path, objects)
    m = measure(lambda: getattr(api, method.lower())(url, DEEP, content_type="application/json"))
    assert m.result.status_code == 400, m.result.content[:300]
    assert m.result.json() == {"detail": LIMIT_MESSAGE}
    assert m.seconds < 1 and m.growth < 50 * MiB


def test_the_token_endpoint_too(anon):
    r = anon.post("/api/auth-token/", DEEP, content_type="application/json")
    assert r.status_code == 400 and r.json() == {"detail": LIMIT_MESSAGE}


def test_the_limit_is_a_setting_and_counts_levels(api, settings):
    settings.NUMAWEB_MAX_JSON_DEPTH = 3
    body = json.dumps({"cluster": 1, "jobs": [[[1]]]})  # object, list, list, list: 4 levels
    r = api.post("/api/sessions/", body, content_type="application/json")
    assert r.status_code == 400 and "deeper than 3 levels (NUMAWEB_MAX_JSON_DEPTH)" in r.json()["detail"]
    assert not deeper_than({"a": [[1]]}, 3) and deeper_than({"a": [[[]]]}, 3) and not deeper_than(5, 0)


def test_a_chunked_body_is_411(api):
    r = api.post("/api/jobs/", json.dumps({"name": "x"}), content_type="application/json",
                 HTTP_TRANSFER_ENCODING="chunked")
    assert r.status_code == 411
    assert r.json() == {"detail": "a chunked request body is not accepted: send it with a Content-Length"}
