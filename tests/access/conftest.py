import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_queue(tmp_path_factory):
    """Sessions started by these tests go to a scratch folder, never to the product's queue."""
    from tests.web.helpers import filesystem_broker

    with filesystem_broker(tmp_path_factory.mktemp("broker")):
        yield


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
