"""The jobs page of a larger cluster in a real browser: "Start session" sits at the top of the page and
one click schedules every schedulable job of the cluster (a real Celery worker runs it); the list is
filtered over HTMX without a reload, and ticking a job switches the form to the picked jobs."""

import pytest
from playwright.sync_api import Page, expect

from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling.models import SchedulingSession

pytestmark = pytest.mark.browser


@pytest.fixture
def big(transactional_db):
    from numaweb.inventory.large_demo import build_large_demo

    return build_large_demo("big", nodes=60, pods=200, seed=3)


def test_one_click_from_the_top_schedules_the_whole_cluster(page: Page, live_server, big, worker):
    expected = {j.pk for j in job_services.schedulable_jobs(big)}
    assert len(expected) > 50  # more than one page of the list
    page.goto(f"{live_server.url}/jobs/?cluster={big.pk}")
    button = page.locator("#session-form button[type=submit]")
    box = button.bounding_box()
    assert box is not None and box["y"] + box["height"] <= page.viewport_size["height"]  # seen without scrolling
    expect(page.locator("#session-form input[name=scope][value=all]")).to_be_checked()
    button.click()
    expect(page.locator("section.session")).to_have_attribute("data-status", "done", timeout=60000)
    session = SchedulingSession.objects.get()
    assert session.cluster == big and set(session.jobs.values_list("pk", flat=True)) == expected


def test_filter_over_htmx_and_pick_from_the_page(page: Page, live_server, big):
    page.goto(f"{live_server.url}/jobs/?cluster={big.pk}")
    rows = page.locator("#job-list tr[data-job]")
    expect(rows).to_have_count(50)
    page.evaluate("window.__marker = 'kept'")
    job = Job.objects.filter(cluster=big).order_by("id")[3]
    page.fill("#job-filters input[name=q]", job.name)  # typed: swapped after a pause, and never again on blur
    expect(rows).to_have_count(Job.objects.filter(cluster=big, name__icontains=job.name).count())
    expect(page.locator(f'#job-list tr[data-job="{job.name}"]')).to_have_count(1)
    assert page.evaluate("window.__marker") == "kept"  # swapped, not reloaded
    assert f"q={job.name}" in page.url  # hx-push-url: the filter is in the address
    pick = page.get_by_label(f"pick {job.namespace}/{job.name} for the comparison")
    pick.check()
    expect(page.locator("#compare-form input[name=cmp-scope][value=picked]")).to_be_checked()
    expect(page.locator("#session-form input[name=scope][value=all]")).to_be_checked()  # the other form unmoved
    pick.uncheck()  # the list was not swapped again when the name box lost focus: the box is still there
    expect(page.locator("#compare-form input[name=cmp-scope][value=all]")).to_be_checked()
    page.fill("#job-filters input[name=q]", "")
    page.select_option("#job-filters select[name=status]", "pending")  # a select filters as it changes
    pending = Job.objects.filter(cluster=big, status="pending").count()
    expect(page.locator("#job-list p.count")).to_have_attribute("data-total", str(pending))
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.status)")) == {"pending"}
    assert page.evaluate("window.__marker") == "kept"
