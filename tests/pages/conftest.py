import pytest

from numaweb.inventory.demo import build_demo


@pytest.fixture(autouse=True, scope="session")
def _private_queue(tmp_path_factory):
    """Sessions queued by these tests go to a scratch folder, never to the product's queue."""
    from tests.web.helpers import filesystem_broker

    with filesystem_broker(tmp_path_factory.mktemp("broker")):
        yield


@pytest.fixture
def demo(db):
    return build_demo("demo")

