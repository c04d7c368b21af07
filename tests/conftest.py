"""Shared fixtures: the conformance vectors (taken from the upstream projects' own tests), users by role and
clients logged in as them."""

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "conformance" / "data"


def load_vectors(name: str) -> dict:
    """A conformance file by stem, e.g. `load_vectors("kubelet_merge")`."""
    return json.loads((DATA / f"{name}.json").read_text())


def pytest_configure(config: pytest.Config) -> None:
    """What the product's entry points do before they start (numaweb.startup): the data folder the test databases
    are made in, and the secret key the clients sign with."""
    from numaweb.startup import prepare

    prepare()


@pytest.fixture(scope="session")
def vectors():
    return load_vectors


@pytest.fixture
def make_user(db):
    """`make_user(name, role)`: a user holding one role (viewer, operator, admin) through its group, with the
    password `pw-<name>-123`; role None gives a user with no role."""
    from django.contrib.auth import get_user_model

    from numaweb.access.roles import set_role

    def make(name: str, role: str | None):
        user = get_user_model().objects.create_user(name, password=f"pw-{name}-123")
        if role is not None:
            set_role(user, role)
        return user

    return make


def _logged_in(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def client(make_user):
    """Django's test client (pytest-django's `client`, overridden) logged in with role admin."""
    return _logged_in(make_user("pat", "admin"))


@pytest.fixture
def operator_client(make_user):
    return _logged_in(make_user("olga", "operator"))


@pytest.fixture
def viewer_client(make_user):
    return _logged_in(make_user("vera", "viewer"))


@pytest.fixture
def user(make_user):
    """The `api` fixture's user: role admin (not a superuser, so the role's permissions are what is tested)."""
    return make_user("alice", "admin")


@pytest.fixture
def token(user):
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=user)


@pytest.fixture
def api(token):
    """An API client with the token of `user` (role admin)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def operator_api(make_user):
    """An API client with an operator's token."""
    from tests.web.helpers import token_client

    return token_client(make_user("otto", "operator"))  # not operator_client's olga: a test may use both


@pytest.fixture
def viewer_api(make_user):
    from tests.web.helpers import token_client

    return token_client(make_user("vic", "viewer"))


@pytest.fixture
def anon_client(db):
    """Not logged in: pages redirect to the login page, the API answers 401."""
    from django.test import Client

    return Client()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Rate limits count in Django's cache: each test starts with none spent."""
    from django.core.cache import cache

    cache.clear()
