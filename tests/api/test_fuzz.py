"""The schema is the contract: Schemathesis, in process (WSGI), with every one of its checks (no 500, status
codes, content types, response schemas and headers, auth that is not ignored, ...) over every operation the
schema lists, as a viewer, an operator and an admin; then the stateful phase, following the links it infers
(create → read → finish → delete, sessions → results → rerun). No finding is allowed.

The operations come from the schema itself (drf-spectacular's generator, as `/api/schema/` serves it), so an
endpoint added later is tested without touching this file. Derandomized and bounded (a few examples per
operation): every run sends the same requests, so a red run is reproducible."""

from __future__ import annotations

import io
import json

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig

from numaweb.wsgi import application

# One setting differs from Schemathesis' defaults: data valid by the schema may still be refused with 400 (the
# documented answer naming the field) for what a schema cannot say: a referenced id that does not exist, a job
# with neither tasks nor a manifest, a topology the engine cannot read. Every other check runs as shipped.
CONFIG = SchemathesisConfig.from_dict({"checks": {"positive_data_acceptance": {
    "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "429", "503"]}}})
schema = schemathesis.openapi.from_dict(json.loads(json.dumps(SchemaGenerator().get_schema(public=True))),
                                        config=CONFIG)


def wsgi(environ, start_response):
    """The product's WSGI application, behind one repair of the test transport: werkzeug's client (Schemathesis'
    WSGI transport) writes an empty form field with no line break before the next boundary, which Django's
    parser reads as no field at all, so the server would never see it. Over HTTP (curl, requests) the field
    arrives; the repair makes the in-process request the same. The client also asks for gzip (requests' default
    header) but, in-process, is handed the bytes undecoded: the header is dropped here, as a client that cannot
    decode would not send it (the Schemathesis run over HTTP, test_schemathesis_cli, reads compressed answers)."""
    environ.pop("HTTP_ACCEPT_ENCODING", None)
    content_type = environ.get("CONTENT_TYPE", "")
    if content_type.startswith("multipart/form-data") and "boundary=" in content_type:
        boundary = content_type.split("boundary=", 1)[1].strip('"').encode()
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        body = body.replace(b"\r\n\r\n--" + boundary, b"\r\n\r\n\r\n--" + boundary)
        environ.update({"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))})
    return application(environ, start_response)


schema.app = wsgi
ROLES = ("viewer", "operator", "admin")
BOUNDED = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": list(HealthCheck)}



@pytest.fixture
def seeded(db, eager, django_capture_on_commit_callbacks):
    """Data behind every kind of answer: a cluster with nodes and an allocation, jobs, a done session with
    placed and unplaced pods, a done comparison. Requests go through the real WSGI handler, so (as Django's
    test client does) it must not close the test's database connection at the end of each request."""
    from numaweb.comparisons import services as comparisons
    from numaweb.inventory.models import Allocation, Cluster
    from numaweb.scheduling import services as scheduling
    from tests.web.helpers import make_job, make_node

    cluster = Cluster.objects.create(name="fuzz")
    node = make_node(cluster, "n1")
    make_node(cluster, "n2", (1, 1, 2, 1))
    Allocation.objects.create(node=node, pod="default/a", cpus="0")
    make_job("j1")
    make_job("too-big", cpus="64")
    with django_capture_on_commit_callbacks(execute=True):
        scheduling.start_session(cluster, "volcano", dry_run=True)
        comparisons.start_comparison(cluster, comparisons.parse_variants(cluster, [{"profile": "aligned"}]),
                                     shape=comparisons.parse_shape({"cpu": "2"}))
    make_job("j2")  # pending: a session or comparison started by a request has something to place
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield cluster
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(params=ROLES)
def auth(request, seeded, make_user) -> dict[str, str]:
    user = make_user(f"fuzz-{request.param}", request.param)
    return {"Authorization": f"Token {Token.objects.create(user=user).key}"}


@schema.parametrize()
@settings(max_examples=5, **BOUNDED)
def test_every_operation_answers_as_documented(case, auth):
    response = case.call(headers=auth)
    case.validate_response(response, headers=auth)


@pytest.mark.parametrize("role", ROLES)
def test_stateful_links_answer_as_documented(role, seeded, make_user):
    """Schemathesis chains calls through the links it infers from the schema, with ids from real answers, so
    sequences (create, finish, delete, read) reach what a single call cannot; every step is checked fully."""
    machine = schema.as_state_machine()
    assert machine.bundles, "no links were found in the schema: the stateful phase would test nothing"
    auth = {"Authorization": f"Token {Token.objects.create(user=make_user(f'fuzz-{role}', role)).key}"}

    class Machine(machine):
        """Each scenario starts from the seeded database (a savepoint rolled back after it), so a replayed
        scenario meets the same ids and answers, as Hypothesis requires."""

        def setup(self):
            self.savepoint = transaction.savepoint()

        def teardown(self):
            transaction.savepoint_rollback(self.savepoint)

        def get_call_kwargs(self, case):
            return {"headers": auth}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            """As Schemathesis does, with the credentials named, so its auth check knows what to leave out."""
            case.validate_response(response, additional_checks=additional_checks, headers=auth,
                                   transport_kwargs=kwargs, recorder=self.recorder)

    Machine.run(settings=settings(max_examples=10, stateful_step_count=5, **BOUNDED))
