import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.inventory.models import Cluster


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def token(user):
    return Token.objects.create(user=user)


@pytest.fixture
def api(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def anon(db):
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
