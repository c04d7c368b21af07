"""Playwright on Debian's Chromium (never a downloaded browser) against pytest-django's live server.

The sync Playwright API runs an event loop in the test thread, so Django's async-safety check must
be relaxed for these tests only."""

import os

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "headless": True, "args": ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1366, "height": 900}}


@pytest.fixture
def context(context, live_server, make_user):
    """Every page opens logged in with role admin (`anon_context` for a visitor who is not)."""
    from numaweb.access.sessions import session_cookie

    context.add_cookies([session_cookie(make_user("pat", "admin"), live_server.url)])
    return context


@pytest.fixture
def page(page):
    """Every page the tests open carries a Content-Security-Policy, and nothing on it breaks the policy
    (Chromium reports each refused inline script or style, eval or foreign load on the console)."""
    violations: list[str] = []
    unprotected: list[str] = []
    page.on("console", lambda m: "Content Security Policy" in m.text and violations.append(m.text))
    page.on("response", lambda r: r.request.resource_type == "document"
            and "content-security-policy" not in r.headers and unprotected.append(r.url))
    yield page
    assert not violations, violations
    assert not unprotected, unprotected


@pytest.fixture
def demo(transactional_db):
    from numaweb.inventory.demo import build_demo

    return build_demo("demo")


@pytest.fixture
def worker(transactional_db, tmp_path):
    """A real Celery worker thread consuming a private file-system queue (the embedded transport)."""
    from celery.contrib.testing.worker import start_worker

    from numaweb.celery import app
    from tests.web.helpers import filesystem_broker

    with filesystem_broker(tmp_path / "broker"), start_worker(app, pool="solo", concurrency=1,
                                                              perform_ping_check=False, shutdown_timeout=20):
        yield app


@pytest.fixture(autouse=True)
def _no_failed_request(request):
    """Tests that drive a page assert at the end that every request it made (every asset) loaded."""
    if "page" not in request.fixturenames:
        yield
        return
    from tests.browser.requests import watch_failed_requests

    failed = watch_failed_requests(request.getfixturevalue("page"))
    yield
    assert not failed, "failed requests:\n" + "\n".join(failed)
