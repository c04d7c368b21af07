"""Comparisons in a real browser: the form on the jobs page starts one, a real Celery worker runs its
variants, the page polls until the charts replace the progress, and every chart is drawn with one
mark per variant (sizes follow the values); the dashboard's headroom box answers on the node cards."""

import pytest
from playwright.sync_api import Page, expect

from numaweb.comparisons.models import Comparison
from numaweb.inventory.models import Node
from scheduler_core.scheduler.compare import BLOCK_BINS
from scheduler_core.scheduler.profiles import PROFILES

pytestmark = pytest.mark.browser

BOXES = """els => els.map(e => { const b = e.getBBox(); return {w: b.width, h: b.height,
    value: e.dataset.value, series: e.dataset.series, category: e.dataset.category || null}; })"""


def test_compare_from_the_jobs_page_and_read_the_charts(page: Page, live_server, demo, worker):
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live_server.url + "/jobs/")
    form = page.locator("#compare-form")
    expect(form.locator("select[name='v-1-profile']")).to_have_value("aligned")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/comparisons/*/", timeout=15000)
    body = page.locator("#comparison-body")
    expect(body).to_have_attribute("data-status", "done", timeout=60000)  # polled, no reload
    comparison = Comparison.objects.get()
    variants = list(comparison.variants.all())
    assert [v.profile for v in variants] == list(PROFILES)  # the form opens with a row per profile

    charts = page.locator("svg[data-chart=bars]")
    count = charts.count()
    assert count >= 9
    for i in range(count):
        bars = charts.nth(i).locator("rect.chart-bar").evaluate_all(BOXES)
        assert [b["series"] for b in bars] == [str(i) for i in range(len(variants))]
        values = [float(b["value"]) if b["value"] else 0.0 for b in bars]
        longest = max(b["w"] for b in bars)
        for b, value in zip(bars, values, strict=True):  # drawn: a bar's length follows its value
            assert (b["w"] > 0) == (value > 0)
            if max(values):
                assert b["w"] == pytest.approx(longest * value / max(values), abs=0.2)
    tae = page.locator("[data-metric=topology_affinity_errors] rect.chart-bar").evaluate_all(BOXES)
    assert [int(b["value"]) for b in tae] == [v.metrics["topology_affinity_errors"] for v in variants]
    assert tae[1]["value"] == "0" and tae[1]["w"] == 0  # aligned: none

    columns = page.locator("svg[data-chart=columns] rect.chart-bar").evaluate_all(BOXES)
    assert len(columns) == len(variants) * len(BLOCK_BINS)
    for c in columns:
        assert int(c["value"]) == variants[int(c["series"])].metrics["block_histogram"][c["category"]]
        assert (c["h"] > 0) == (int(c["value"]) > 0)

    strips = page.locator("svg[data-chart=heat]")
    expect(strips).to_have_count(len(variants))
    numa = sum(n.num_numa_nodes for n in Node.objects.filter(cluster=demo))
    for i in range(len(variants)):
        cells = strips.nth(i).locator("rect.heat").evaluate_all(BOXES)
        assert len(cells) == numa and all(c["w"] > 0 and c["h"] > 0 for c in cells)
    # colours come from the stylesheet (classes), not inline styles
    fill = page.locator("svg[data-chart=bars] rect.series-1").first.evaluate("e => getComputedStyle(e).fill")
    assert fill == "rgb(230, 159, 0)"
    assert not [e for e in errors if not e.startswith("Failed to load resource")], errors  # /favicon.ico
    # export links
    assert page.locator("a[href$='export/?format=csv']").count() == 1


def test_dashboard_headroom_box(page: Page, live_server, demo):
    page.goto(live_server.url + "/")
    page.fill("#id_hr-cpu", "4")
    page.fill("#id_hr-memory", "8Gi")
    page.fill("#id_hr-devices", "nvidia.com/gpu=1")
    page.select_option("#id_hr-policy", "single-numa-node")
    page.evaluate("window.__marker = 'kept'")
    page.click("#headroom-form button[type=submit]")
    answers = page.locator("li.card [data-headroom]")
    expect(answers).to_have_count(Node.objects.filter(cluster=demo).count())
    assert page.evaluate("window.__marker") == "kept"  # swapped in place over HTMX
    counts = dict(page.locator("li.card").evaluate_all(
        "els => els.map(e => [e.dataset.node, +e.querySelector('[data-headroom]').dataset.headroom])"))
    assert counts["srv-gpu-3"] > 0 and counts["node-1"] == 0  # GPUs only on the srv-gpu nodes
    expect(page.locator("[data-headroom-total=demo]")).to_have_text(str(sum(counts.values())))
    # filtering keeps the question: the answers stay on the remaining cards
    page.select_option("select[name=policy]", "single-numa-node")
    expect(answers).to_have_count(Node.objects.filter(cluster=demo, topology_manager_policy="single-numa-node").count())


def test_session_page_draws_numa_span_per_pod(page: Page, live_server, demo):
    from numaweb.jobs.models import Job
    from numaweb.scheduling import services
    from scheduler_core.scheduler.compare import SPAN_BINS

    session = services.start_session(demo, "volcano", dry_run=True, jobs=list(Job.objects.all()))
    session = services.execute_session(session.pk)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    columns = page.locator("[data-metric=numa_span] rect.chart-bar").evaluate_all(BOXES)
    assert [c["category"] for c in columns] == list(SPAN_BINS)
    assert sum(int(c["value"]) for c in columns) == session.pods_total
    assert all((c["h"] > 0) == (int(c["value"]) > 0) for c in columns)
