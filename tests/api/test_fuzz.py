"""Schemathesis against the OpenAPI schema, in process (WSGI), with a token: no request makes a 500,
and responses match the schema's status codes. Examples are bounded to keep the suite fast."""

import json

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from numaweb.wsgi import application

# the schema endpoint needs a login now: the same document straight from drf-spectacular's generator
schema = schemathesis.openapi.from_dict(json.loads(json.dumps(SchemaGenerator().get_schema(public=True))))
schema.app = application


@pytest.fixture
def seeded(db, token):
    """A cluster with a node, an allocation and a job, so ids 1 exist and reads return data. Requests
    go through the real WSGI handler, so (as Django's test client does) keep it from closing the
    test's database connection at the end of each request."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from numaweb.inventory.models import Allocation, Cluster
    from tests.web.helpers import make_job, make_node

    node = make_node(Cluster.objects.create(name="fuzz"), "n1")
    Allocation.objects.create(node=node, pod="default/a", cpus="0")
    make_job("j1")
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield token
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_api_never_errors(case, seeded):
    """Derandomized, like the stateful test: every run tries the same examples, so a red run is reproducible."""
    response = case.call(headers={"Authorization": f"Token {seeded.key}"})
    case.validate_response(response, checks=[not_a_server_error])


def test_stateful_links_never_error(seeded):
    """Stateful: Schemathesis chains calls through the links it infers from the schema (POST /api/jobs/ →
    GET/DELETE /api/jobs/{id}, finish; clusters → nodes → allocations; sessions → results, rerun), using
    ids from real responses, so sequences such as create, finish, delete, read reach the code paths a
    single random call cannot. No step may answer 500."""
    machine = schema.as_state_machine()
    assert machine.bundles, "no links were found in the schema: the stateful phase would test nothing"

    from django.db import transaction

    class Machine(machine):
        """Each scenario starts from the seeded database (a savepoint rolled back after it), so a replayed
        scenario meets the same ids and answers, as Hypothesis requires."""

        def setup(self):
            self.savepoint = transaction.savepoint()

        def teardown(self):
            transaction.savepoint_rollback(self.savepoint)

        def get_call_kwargs(self, case):
            return {"headers": {"Authorization": f"Token {seeded.key}"}}

        def validate_response(self, response, case, additional_checks=(), **kwargs):
            case.validate_response(response, checks=[not_a_server_error])

    Machine.run(settings=settings(max_examples=12, stateful_step_count=6, deadline=None, derandomize=True,
                                  database=None, suppress_health_check=list(HealthCheck)))
