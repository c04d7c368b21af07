import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.inventory.models import Cluster


@pytest.fixture
def user(make_user):
    """The `api` fixture's user: role admin (not a superuser, so the role's permissions are what is tested)."""
    return make_user("alice", "admin")


@pytest.fixture
def token(user):
    return Token.objects.create(user=user)


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def api(token):
    """An API client with the token of `user` (role admin)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def operator_api(make_user):
    return token_client(make_user("olga", "operator"))


@pytest.fixture
def viewer_api(make_user):
    return token_client(make_user("vera", "viewer"))


@pytest.fixture
def anon(db):
    """No credentials at all: every operation answers 401 (unless NUMAWEB_PUBLIC_READ opens reads)."""
    return APIClient()


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="c1")


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True, scope="session")
def _private_queue(tmp_path_factory):
    """Messages queued by API tests go to a scratch folder, never to the product's queue."""
    from tests.web.helpers import filesystem_broker

    with filesystem_broker(tmp_path_factory.mktemp("broker")):
        yield
