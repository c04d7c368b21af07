"""The OpenAPI schema builds without warnings, validates, and the docs page is served offline."""

from django.core.management import call_command


def test_schema_validates(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in ("/api/nodes/upload/", "/api/sessions/{id}/results/", "/api/sessions/{id}/rerun/", "/api/jobs/"):
        assert path in text


def test_schema_and_docs_served(client, db):
    r = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    assert "tokenAuth" in r.content.decode()
    docs = client.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/" in docs
    assert "jsdelivr" not in docs and "unpkg" not in docs and 'src="http' not in docs
