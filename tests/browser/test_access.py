"""Logging in through the login page, the pages each role sees, and the API docs and admin site under the
Content-Security-Policy (the `page` fixture fails a test on any policy violation)."""

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


@pytest.fixture
def visitor(browser, live_server):
    """A browser context with nobody logged in, checked for policy violations like `page`."""
    context = browser.new_context()
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda m: "Content Security Policy" in m.text and violations.append(m.text))
    yield page
    context.close()
    assert not violations, violations


def test_login_page_then_the_role_decides_the_controls(visitor: Page, live_server, demo, make_user):
    make_user("vera", "viewer")
    visitor.goto(live_server.url + "/jobs/")
    expect(visitor).to_have_url(f"{live_server.url}/login/?next=/jobs/")
    visitor.fill("#id_username", "vera")
    visitor.fill("#id_password", "pw-vera-123")
    visitor.click("button[type=submit]")
    expect(visitor).to_have_url(f"{live_server.url}/jobs/")
    expect(visitor.locator("[data-role]")).to_have_attribute("data-role", "viewer")
    expect(visitor.locator("#job-form")).to_have_count(0)
    expect(visitor.locator("#session-form")).to_have_count(0)
    visitor.click(".account button[type=submit]")
    expect(visitor).to_have_url(f"{live_server.url}/login/")


def test_api_docs_and_admin_render_under_the_policy(page: Page, live_server, demo):
    page.goto(live_server.url + "/api/docs/")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible(timeout=20000)
    page.goto(live_server.url + "/admin/inventory/node/")
    expect(page.locator("#result_list")).to_be_visible()
    page.goto(live_server.url + "/admin/inventory/node/add/")
    expect(page.locator("#node_form")).to_be_visible()
    # the admin's history pages (django-simple-history's list, with its changes) and the API in a browser: no
    # violation either (`page` fails the test on any); the API answers JSON, not DRF's browsable pages
    node = demo.nodes.first()
    page.goto(f"{live_server.url}/admin/inventory/node/{node.pk}/history/")
    expect(page.locator("#change-history")).to_be_visible()
    page.goto(f"{live_server.url}/admin/inventory/cluster/{demo.pk}/history/")
    expect(page.locator("#change-history")).to_be_visible()
    for url in ("/api/", "/api/clusters/", f"/api/nodes/{node.pk}/", "/api/sessions/"):
        response = page.goto(live_server.url + url)
        assert response.status == 200 and response.headers["content-type"].startswith("application/json"), url
