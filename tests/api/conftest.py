import pytest
from rest_framework.test import APIClient

from numaweb.inventory.models import Cluster


@pytest.fixture
def anon(db):
    """No credentials at all: every operation answers 401 (unless NUMAWEB_PUBLIC_READ opens reads)."""
    return APIClient()


@pytest.fixture
def eager(settings):
    """Celery runs each task in the caller, at once (sessions, comparisons and make room end within the request)."""
    from numaweb.celery import app

    settings.CELERY_TASK_ALWAYS_EAGER = True
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


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
