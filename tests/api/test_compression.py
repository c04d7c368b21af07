"""Issue 31: the API's JSON answers gzip-compressed for a client that accepts it (never an HTML page: BREACH),
the OpenAPI document generated once per process, and a node list serving each stored topology document as
it is stored (not decoded and encoded again): the same JSON either way."""

from __future__ import annotations

import gzip
import json

import pytest
from drf_spectacular.generators import SchemaGenerator

from numaweb.api.rawjson import JSONRenderer, RawJSON
from numaweb.api.schema import SchemaView
from numaweb.inventory.models import Node
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(cluster):
    return [make_node(cluster, f"n{i}", shape=(2, 1, 4, 2)) for i in range(6)]


def test_the_schema_is_generated_once_and_served_the_same(client, monkeypatch):
    SchemaView.documents.clear()
    calls = []
    real = SchemaGenerator.get_schema

    def counted(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    first = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    second = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and len(calls) == 1
    assert "/api/pods/" in json.loads(first.content)["paths"]
    assert first["Content-Type"] == second["Content-Type"] == "application/vnd.oai.openapi+json"
    yaml = client.get("/api/schema/")  # YAML, drf-spectacular's default: another document, generated once too
    assert yaml.content.startswith(b"openapi:") and len(calls) == 2
    assert client.get("/api/schema/").content == yaml.content and len(calls) == 2
    assert client.get("/api/schema/?lang=de", HTTP_ACCEPT="application/vnd.oai.openapi+json").status_code == 200
    assert len(calls) == 3  # `lang` is a key: the document may be translated


def test_the_schema_gzipped_decodes_to_the_same_document(client):
    plain = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    packed = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json", HTTP_ACCEPT_ENCODING="gzip")
    assert packed["Content-Encoding"] == "gzip" and "Content-Encoding" not in plain
    assert len(packed.content) < len(plain.content) / 4
    assert gzip.decompress(packed.content) == plain.content
    for response in (plain, packed):
        assert "Accept-Encoding" in response["Vary"] and "Accept" in response["Vary"]


def test_api_json_is_gzipped_when_accepted_and_decodes_to_the_same(client, nodes):
    plain = client.get("/api/nodes/?page_size=100")
    packed = client.get("/api/nodes/?page_size=100", HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert packed["Content-Encoding"] == "gzip" and "Content-Encoding" not in plain
    assert "Accept-Encoding" in plain["Vary"] and "Accept-Encoding" in packed["Vary"]
    assert int(packed["Content-Length"]) == len(packed.content) < len(plain.content)
    assert gzip.decompress(packed.content) == plain.content
    assert len(json.loads(plain.content)["results"]) == 6


def test_html_pages_are_never_compressed(client, nodes):
    """A page carries its forms' CSRF token: compressed, its size would leak it (BREACH)."""
    for path in ("/", "/api/docs/", "/jobs/", "/login/"):
        response = client.get(path, HTTP_ACCEPT_ENCODING="gzip")
        assert response.status_code in (200, 302), path
        assert "Content-Encoding" not in response, path
    page = client.get("/", HTTP_ACCEPT_ENCODING="gzip")
    assert b"csrfmiddlewaretoken" in page.content or b"csrf" in page.content.lower()


def test_a_write_is_not_compressed(client, nodes):
    """Only answers to a GET: a write's answer may hold a secret beside what the request sent (a new token)."""
    node = nodes[0]
    response = client.patch(f"/api/nodes/{node.pk}/", {"topology_manager_policy": "restricted"},
                            content_type="application/json", HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200 and "Content-Encoding" not in response
    assert len(response.content) > 1024  # large enough to be compressed, were it a GET


def test_a_node_list_serves_each_stored_topology_as_the_detail_does(client, nodes):
    listed = json.loads(client.get("/api/nodes/?page_size=100").content)["results"]
    for row in listed:
        detail = json.loads(client.get(f"/api/nodes/{row['id']}/").content)
        assert row == detail  # every field, the topology document included, the same JSON
        assert row["topology"] == Node.objects.get(pk=row["id"]).topology
    second = json.loads(client.get("/api/nodes/?page_size=2&page=2").content)["results"]
    assert [r["id"] for r in second] == [r["id"] for r in listed[2:4]]


def test_raw_json_is_spliced_where_its_placeholder_is_and_nowhere_else():
    """A stored string that looks like a placeholder stays a string: the key is random per answer."""
    data = {"a": RawJSON('{"x": [1, 2.5, "\\u00e9"], "y": null}'), "b": "\0" + "0" * 16 + ":0\0",
            "c": [RawJSON("[]"), RawJSON('"\u2028"')], "d": "\u2028"}
    out = JSONRenderer().render(data)
    assert json.loads(out) == {"a": {"x": [1, 2.5, "é"], "y": None}, "b": "\0" + "0" * 16 + ":0\0", "c": [[], "\u2028"],
                               "d": "\u2028"}
    assert "\u2028".encode() not in out  # escaped, as DRF escapes it in the rest of the answer
    assert json.loads(JSONRenderer().render({"plain": [1, "two"]})) == {"plain": [1, "two"]}
