"""Who may call what: every API operation in the OpenAPI schema, and every page, for anonymous visitors,
viewers, operators and admins.

The tables below classify each operation by the least role allowed to use it. A new endpoint or page
that is not classified fails the test by name: add one line here (and give the view the permission the
line says, see numaweb.access). Expected statuses:
- anonymous: 401 (API), a redirect to the login page (pages), unless the line says ANYONE;
- a role below the line's: 403;
- the line's role and above: the permission check passes. Lists answer 200, deletes 204; other
  operations are sent an empty body and no query, so any answer below 500 except 401/403 (200, or 400
  for a missing field) shows the permission passed (bodies are each endpoint's own tests' business)."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.access.roles import ADMIN, AGENT, OPERATOR, ROLES, VIEWER
from numaweb.comparisons.models import Comparison
from numaweb.inventory.models import Allocation, Cluster
from numaweb.room.models import RoomPlan
from numaweb.scheduling import services
from tests.web.helpers import make_job, make_node

pytestmark = pytest.mark.django_db

ANYONE = "anonymous"

# -- the API: (METHOD, path as in the schema) -> least role ------------------------------------------
API = {
    ("POST", "/api/auth-token/"): ANYONE,  # where credentials are exchanged for a token
    ("POST", "/api/agent/reports/"): ADMIN,  # and the agent role, whose only right it is (below)
    ("GET", "/api/clusters/"): VIEWER,
    ("POST", "/api/clusters/"): ADMIN,
    ("GET", "/api/clusters/{id}/headroom/"): VIEWER,
    ("GET", "/api/pods/"): VIEWER,
    ("GET", "/api/clusters/{id}/rejected/"): VIEWER,
    ("POST", "/api/clusters/{id}/make-room/"): OPERATOR,
    ("GET", "/api/make-room/{id}/"): VIEWER,
    ("GET", "/api/make-room/{id}/plan.json"): VIEWER,
    ("GET", "/api/make-room/{id}/plan.sh"): VIEWER,
    ("POST", "/api/clusters/{id}/defrag/"): OPERATOR,
    ("GET", "/api/defrag/{id}/"): VIEWER,
    ("POST", "/api/clusters/{id}/import/"): ADMIN,
    ("GET", "/api/clusters/{id}/"): VIEWER,
    ("PUT", "/api/clusters/{id}/"): ADMIN,
    ("PATCH", "/api/clusters/{id}/"): ADMIN,
    ("DELETE", "/api/clusters/{id}/"): ADMIN,
    ("GET", "/api/nodes/"): VIEWER,
    ("POST", "/api/nodes/"): ADMIN,
    ("GET", "/api/nodes/{id}/"): VIEWER,
    ("PUT", "/api/nodes/{id}/"): ADMIN,
    ("PATCH", "/api/nodes/{id}/"): ADMIN,
    ("DELETE", "/api/nodes/{id}/"): ADMIN,
    ("POST", "/api/nodes/upload/"): ADMIN,
    ("POST", "/api/nodes/{id}/check-state/"): OPERATOR,
    ("GET", "/api/nodes/{id}/kubelet-config/"): VIEWER,
    ("POST", "/api/nodes/{id}/kubelet-config/"): ADMIN,
    ("GET", "/api/allocations/"): VIEWER,
    ("POST", "/api/allocations/"): ADMIN,
    ("GET", "/api/allocations/{id}/"): VIEWER,
    ("DELETE", "/api/allocations/{id}/"): ADMIN,
    ("GET", "/api/jobs/"): VIEWER,
    ("POST", "/api/jobs/"): OPERATOR,
    ("GET", "/api/jobs/{id}/"): VIEWER,
    ("DELETE", "/api/jobs/{id}/"): ADMIN,
    ("POST", "/api/jobs/{id}/finish/"): OPERATOR,
    ("GET", "/api/comparisons/"): VIEWER,
    ("POST", "/api/comparisons/"): OPERATOR,
    ("GET", "/api/comparisons/{id}/"): VIEWER,
    ("GET", "/api/comparisons/{id}/export/"): VIEWER,
    ("GET", "/api/sessions/"): VIEWER,
    ("POST", "/api/sessions/"): OPERATOR,
    ("GET", "/api/sessions/{id}/"): VIEWER,
    ("POST", "/api/sessions/{id}/rerun/"): OPERATOR,
    ("GET", "/api/sessions/{id}/results/"): VIEWER,
    ("GET", "/api/sessions/{id}/explanation.json"): VIEWER,
}

# -- the pages: URL name -> (least role to open it, least role to post to it or None) -------------------
PAGES = {
    "home": (VIEWER, None),
    "pages:dashboard": (VIEWER, None),
    "pages:node": (VIEWER, None),
    "pages:node-whatif": (OPERATOR, OPERATOR),
    "pages:node-cpu": (VIEWER, None),
    "pages:node-check-state": (OPERATOR, OPERATOR),
    "pages:node-kubelet-config": (VIEWER, ADMIN),
    "pages:cluster-import": (ADMIN, ADMIN),
    "pages:cluster-map": (VIEWER, None),
    "pages:pods": (VIEWER, None),
    "pages:rejected-pod": (VIEWER, None),
    "pages:pod-alignment": (VIEWER, None),
    "pages:cluster-rejected": (VIEWER, None),
    "pages:help": (VIEWER, None),
    "pages:jobs": (VIEWER, OPERATOR),
    "pages:job": (VIEWER, None),
    "pages:job-finish": (OPERATOR, OPERATOR),
    "pages:sessions": (VIEWER, None),
    "pages:session-start": (OPERATOR, OPERATOR),
    "pages:session": (VIEWER, None),
    "pages:session-progress": (VIEWER, None),
    "pages:session-pod": (VIEWER, None),
    "pages:session-hints": (VIEWER, None),
    "comparisons:list": (VIEWER, None),
    "comparisons:start": (OPERATOR, OPERATOR),
    "comparisons:detail": (VIEWER, None),
    "comparisons:strip": (VIEWER, None),
    "room:start": (OPERATOR, OPERATOR),
    "room:detail": (VIEWER, None),
    "room:defrag-start": (OPERATOR, OPERATOR),
    "room:defrag": (VIEWER, None),
}
PERSONAS = (ANYONE, *ROLES)


def _rank(persona: str) -> int:
    return PERSONAS.index(persona)


def operations() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(public=True)
    return [(method.upper(), path) for path, item in schema["paths"].items() for method in item
            if method in ("get", "post", "put", "patch", "delete")]


def test_every_api_operation_is_classified():
    found = set(operations())
    unclassified = sorted(found - API.keys())
    assert not unclassified, f"classify these operations in tests/access/test_matrix.py API: {unclassified}"
    gone = sorted(API.keys() - found)
    assert not gone, f"no longer in the schema, remove from API: {gone}"


@pytest.fixture
def objects(db):
    """One of everything, so every {id} in a path names a real row."""
    cluster = Cluster.objects.create(name="m1")
    node = make_node(cluster, "n1")
    allocation = Allocation.objects.create(node=node, pod="default/a", cpus="0")
    job = make_job("j1")
    session = services.start_session(cluster, "volcano", True, [job])
    comparison = Comparison.objects.create(cluster=cluster)
    room = RoomPlan.objects.create(cluster=cluster, job=job)
    return {"clusters": cluster.pk, "nodes": node.pk, "allocations": allocation.pk, "jobs": job.pk,
            "sessions": session.pk, "comparisons": comparison.pk, "make-room": room.pk}


def _client(make_user, persona: str) -> APIClient:
    client = APIClient()
    if persona != ANYONE:
        user = make_user(f"u-{persona}", persona)
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _url(path: str, ids: dict[str, int]) -> str:
    resource = path.split("/")[2]
    return re.sub(r"\{[^}]+\}", str(ids.get(resource, 1)), path)


@pytest.mark.parametrize("operation", sorted(API), ids=lambda op: f"{op[0]} {op[1]}")
def test_api_matrix(operation, objects, make_user):
    method, path = operation
    least = API[operation]
    url = _url(path, objects) + ("?q=default" if path == "/api/pods/" else "")  # the search needs its query
    seen = {}
    for persona in PERSONAS:  # admin last: a delete it is allowed to make does not hide the others' refusals
        response = getattr(_client(make_user, persona), method.lower())(url, {}, format="json")
        seen[persona] = response.status_code
        if _rank(persona) < _rank(least):
            assert response.status_code == (401 if persona == ANYONE else 403), (persona, seen)
        elif method == "GET" and "{" not in path:
            assert response.status_code == 200, (persona, seen)
        elif method == "DELETE" and persona == ADMIN:
            assert response.status_code == 204, (persona, seen)
        else:
            assert response.status_code not in (401, 403) and response.status_code < 500, (persona, seen)


#: what the agent role may call: nothing else, reads included
AGENT_MAY = {("POST", "/api/agent/reports/")}


@pytest.mark.parametrize("operation", sorted(API), ids=lambda op: f"{op[0]} {op[1]}")
def test_agent_role_may_only_send_reports(operation, objects, make_user):
    method, path = operation
    response = getattr(_client(make_user, AGENT), method.lower())(_url(path, objects), {}, format="json")
    if operation in AGENT_MAY:
        assert response.status_code == 400, response.json()  # the permission passed; an empty report is refused
    elif API[operation] != ANYONE:
        assert response.status_code == 403, (operation, response.status_code)


def test_public_read_opens_every_read_and_no_write(objects, settings):
    settings.NUMAWEB_PUBLIC_READ = True
    anon = APIClient()
    for method, path in sorted(API):
        response = getattr(anon, method.lower())(_url(path, objects), {}, format="json")
        if method == "GET":
            assert response.status_code not in (401, 403) and response.status_code < 500, (method, path, response)
        elif API[(method, path)] != ANYONE:
            assert response.status_code == 401, (method, path, response.status_code)


# -- pages --------------------------------------------------------------------------------------------
def page_routes() -> dict[str, URLPattern]:
    """Every named route outside the API, the admin, the API docs and the account pages."""
    skip = ("api", "admin")
    routes: dict[str, URLPattern] = {}

    def walk(patterns, namespace: str | None) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if p.namespace not in skip:
                    walk(p.url_patterns, p.namespace or namespace)
            elif p.name and not p.name.startswith("api-") and p.name not in ("login", "logout", "healthz",
                                                                                  "metrics"):  # own access rule
                routes[f"{namespace}:{p.name}" if namespace else p.name] = p

    walk(get_resolver().url_patterns, None)
    return routes


def test_every_page_is_classified_and_guarded():
    routes = page_routes()
    unclassified = sorted(routes.keys() - PAGES.keys())
    assert not unclassified, f"classify these pages in tests/access/test_matrix.py PAGES: {unclassified}"
    unguarded = sorted(name for name, p in routes.items() if not hasattr(p.callback, "required_permissions"))
    assert not unguarded, f"guard these page views with numaweb.access.decorators.requires: {unguarded}"


def _page_url(name: str, objects: dict[str, int]) -> str:
    from django.urls import reverse

    route = page_routes()[name]
    resource = next((r for r in ("session", "job", "comparison", "cluster-map") if r in name), "node")
    resource = "cluster" if resource == "cluster-map" else resource
    kwargs = {key: 0 if key == "index" else objects[f"{resource}s"] for key in route.pattern.converters}
    return reverse(name, kwargs=kwargs)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_agent_role_opens_no_page(name, objects, make_user):
    from django.test import Client

    client = Client()
    client.force_login(make_user("p-agent", AGENT))
    assert client.get(_page_url(name, objects)).status_code == 403


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_matrix(name, objects, make_user):
    from django.test import Client

    read, write = PAGES[name]
    url = _page_url(name, objects)
    for persona in PERSONAS:
        client = Client()
        if persona != ANYONE:
            client.force_login(make_user(f"p-{persona}", persona))
        for method, least in (("get", read), ("post", write)):
            if least is None:
                continue
            response = getattr(client, method)(url, {})
            where = (persona, method, response.status_code)
            if persona == ANYONE:
                assert response.status_code == 302 and response["Location"].startswith("/login/?next="), where
            elif _rank(persona) < _rank(least):
                assert response.status_code == 403, where
            else:
                to_login = response.status_code == 302 and response["Location"].startswith("/login/")
                assert not to_login and response.status_code not in (401, 403) and response.status_code < 500, where
