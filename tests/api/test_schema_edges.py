"""Query parameters answered exactly as the schema states them, the cases Schemathesis' command line found
(tests/api/test_schemathesis_cli.py): what the schema allows is answered, what it does not is a 400 naming the
parameter. A failed token login is a 401, and 411 is documented for a body."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests.web.helpers import make_job, make_node


@pytest.fixture
def schema():
    return SchemaGenerator().get_schema(public=True)


def test_headroom_patterns_are_the_schemas_and_the_servers(api, cluster, schema):
    make_node(cluster, "n1")
    params = {p["name"]: p["schema"] for p in schema["paths"]["/api/clusters/{id}/headroom/"]["get"]["parameters"]}
    assert params["cpu"]["pattern"] and params["memory"]["pattern"] and params["devices"]["pattern"]
    assert set(params["policy"]["enum"]) == {"none", "best-effort", "restricted", "single-numa-node"}
    url = f"/api/clusters/{cluster.pk}/headroom/"
    for query in ("cpu=2", "cpu=2000m", "cpu=2&memory=&devices=", "cpu=2&memory=1073741824",
                  "cpu=1&devices=example.com/nic=1,nvidia.com/gpu=0", "cpu=1&policy=none"):
        assert api.get(f"{url}?{query}").status_code == 200, query
    # accepted by the engine's parser before, but not as the schema writes a parameter
    for query, field in (("cpu=1.5", "cpu"), ("cpu=1e3", "cpu"), ("cpu=+2", "cpu"), ("cpu=2&memory=1.5Gi", "memory"),
                         ("cpu=2&memory=8E", "memory"), ("cpu=2&policy=", "policy"), ("cpu=2&profile=", "profile"),
                         ("cpu=2&devices=gpu=1", "devices")):
        response = api.get(f"{url}?{query}")
        assert response.status_code == 400 and field in response.json(), (query, response.content)


def test_pod_search_without_q_lists_every_pod(api, cluster):
    make_job("alpha", cluster=cluster)
    make_job("beta", cluster=cluster)
    for query in ("", "?q=", f"?cluster={cluster.pk}&limit=1"):
        body = api.get(f"/api/pods/{query}").json()
        assert body["count"] == 2, query
    assert len(api.get("/api/pods/?limit=1").json()["results"]) == 1


@pytest.mark.parametrize("query, field", [
    ("limit=0", "limit"), ("limit=501", "limit"), ("cluster=", "cluster"), ("cluster=0", "cluster"),
    ("reason=", "reason"), ("reason=OutOfcpu", "reason"), ("status=", "status"), ("node=" + "n" * 513, "node"),
    ("q=" + "q" * 513, "q"),
])
def test_pod_search_refuses_what_the_schema_does(api, db, query, field):
    response = api.get(f"/api/pods/?{query}")
    assert response.status_code == 400 and field in response.json(), response.content


@pytest.mark.parametrize("query, field", [("page=", "page"), ("page_size=", "page_size"), ("status=", "status"),
                                          ("cluster=", "cluster"), ("page=x", "page")])
def test_an_empty_or_wrong_list_parameter_is_refused(api, db, query, field):
    response = api.get(f"/api/jobs/?{query}")
    assert response.status_code == 400 and field in response.json(), response.content


def test_a_failed_token_login_is_401_a_missing_field_400(make_user, schema):
    make_user("lena", "viewer")
    client = APIClient()
    wrong = client.post("/api/auth-token/", {"username": "lena", "password": "wrong"})
    assert wrong.status_code == 401 and "Unable to log in" in wrong.json()["detail"]
    assert client.post("/api/auth-token/", {"username": "lena"}).json().keys() == {"password"}
    assert client.post("/api/auth-token/", {"username": "lena", "password": "pw-lena-123"}).status_code == 200
    assert "401" in schema["paths"]["/api/auth-token/"]["post"]["responses"]


def test_every_operation_with_a_body_documents_411(schema):
    with_body = [(path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()
                 if op.get("requestBody")]
    assert with_body and all("411" in op["responses"] for _path, _method, op in with_body)


def test_a_multipart_body_with_no_part_is_refused(api, cluster):
    """Django reads a multipart body with no boundary in it (here a bare number) as an empty form: a PATCH would
    answer 200 having changed nothing. It is a 400, and an empty form (its closing boundary only) still reads."""
    url = f"/api/clusters/{cluster.pk}/"
    boundary = "de3dd08f041c295ae3c86aac8a7f9029"
    response = api.generic("PATCH", url, b"-5.993705355148345e+16",
                           content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 400 and "not a multipart form" in response.json()["detail"], response.content
    response = api.generic("PATCH", url, f"--{boundary}--\r\n".encode(),
                           content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 200, response.content
    response = api.generic("PATCH", url, f'--{boundary}\r\nContent-Disposition: form-data; name="description"'
                           f'\r\n\r\nnew\r\n--{boundary}--\r\n'.encode(),
                           content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 200 and response.json()["description"] == "new", response.content


def test_a_boolean_is_true_or_false_as_the_schema_says(api, cluster, schema):
    """A multipart PUT of a node with numatopology=0 was answered 200 (Schemathesis as admin, ST201): DRF reads 0, 1,
    "on", "yes" as booleans where the schema's boolean allows true and false only, in a form as their text."""
    node = make_node(cluster, "n1")
    url = f"/api/nodes/{node.pk}/"
    assert schema["components"]["schemas"]["Node"]["properties"]["numatopology"]["type"] == "boolean"
    for value in ("0", "1", "on", "yes", "", "no"):
        response = api.patch(url, {"numatopology": value}, format="multipart")
        assert response.status_code == 400 and "numatopology" in response.json(), (value, response.content)
    for value in (0, 1, "false"):  # JSON: a number is not a boolean, and neither is a string
        response = api.patch(url, {"numatopology": value}, format="json")
        assert response.status_code == 400 and "numatopology" in response.json(), (value, response.content)
    for value, expected in (("false", False), ("TRUE", True), ("False", False)):
        response = api.patch(url, {"numatopology": value}, format="multipart")
        assert response.status_code == 200 and response.json()["numatopology"] is expected, (value, response.content)
    for value in (False, True):
        assert api.patch(url, {"numatopology": value}, format="json").json()["numatopology"] is value
    # a query parameter's boolean too
    for value in ("1", "yes"):
        snapshot = SimpleUploadedFile("snap.yaml", b"items: []\n")
        response = api.post(f"/api/clusters/{cluster.pk}/import/?dry_run={value}", {"file": snapshot},
                            format="multipart")
        assert response.status_code == 400 and "dry_run" in response.json(), (value, response.content)
