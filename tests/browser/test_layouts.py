"""Layouts that hold, on every page at 1280 and 1440 px: the page never scrolls sideways, no table header
is broken inside a word or narrower than its own words, and a session's result spans the page."""

import json

import pytest
from playwright.sync_api import Page, expect

from numaweb.comparisons import services as comparisons
from numaweb.inventory.models import Node
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from scheduler_core.scheduler.compare import Variant

pytestmark = pytest.mark.browser

WIDTHS = (1280, 1440)

#: per page: how far the document scrolls sideways, and every visible table header whose words are broken
#: across lines or stick out of the cell
CHECK = """() => {
  const doc = document.documentElement;
  const bad = [];
  for (const th of document.querySelectorAll('th')) {
    if (!th.getClientRects().length) continue;  // not displayed (a closed <details>, a hidden panel)
    if (th.scrollWidth > th.clientWidth + 1) bad.push(`${th.textContent.trim()}: wider than its cell`);
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) bad.push(`${th.textContent.trim()}: "${m[0]}" broken across lines`);
      }
    }
  }
  const overflow = doc.scrollWidth - doc.clientWidth;
  const past = overflow > 0 ? [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > doc.clientWidth + 0.5)
    .slice(-5).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`) : [];
  return {overflow, headers: bad, past};
}"""


@pytest.fixture
def scene(demo):
    """The demo with a finished session (every job, volcano), a finished comparison and a held pod."""
    session = services.start_session(demo, "volcano", True, list(Job.objects.all()))
    services.execute_session(session.pk)
    comparison = comparisons.create_comparison(demo, [Variant("volcano"), Variant("aligned"), Variant("unaware")])
    for variant in comparison.variants.all():
        comparisons.execute_variant(variant.pk)
    return {"session": session, "comparison": comparison}


def _pages(scene) -> dict[str, str]:
    gpu = Node.objects.get(name="srv-gpu-1")
    big = Node.objects.get(name="xml-96em64t")
    job = Job.objects.get(name="mpi-ring")
    session, comparison = scene["session"], scene["comparison"]
    return {"dashboard": "/", "node": f"/nodes/{gpu.pk}/", "96-thread node": f"/nodes/{big.pk}/",
            "check-state form": f"/nodes/{gpu.pk}/check-state", "jobs": "/jobs/", "job": f"/jobs/{job.pk}/",
            "sessions": "/sessions/", "session": f"/sessions/{session.pk}/",
            "session, per-node hint rows": f"/sessions/{session.pk}/?expand=1",
            "comparisons": "/comparisons/", "comparison": f"/comparisons/{comparison.pk}/",
            "import": "/clusters/import", "pod search": "/pods/?q=default", "help": "/help/",
            "cluster map": f"/clusters/{gpu.cluster_id}/map"}


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_holds_its_layout(page: Page, live_server, scene, width):
    page.set_viewport_size({"width": width, "height": 900})
    problems = {}
    for name, url in _pages(scene).items():
        page.goto(live_server.url + url)
        # what a page loads after it (a comparison's heat strips) is part of its layout, and leaving while it is
        # still on its way would abort it
        page.wait_for_load_state("networkidle")
        result = page.evaluate(CHECK)
        if result["overflow"] > 0 or result["headers"]:
            problems[name] = result
    assert not problems, json.dumps(problems, indent=1)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_session_started_from_the_jobs_page_spans_the_page(page: Page, live_server, scene, worker, width):
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(live_server.url + "/jobs/")
    page.click("#session-form button[type=submit]")
    section = page.locator("section.session")
    expect(section).to_have_attribute("data-status", "done", timeout=20000)
    main = page.locator("main").bounding_box()
    box = section.bounding_box()
    assert box["width"] >= 0.9 * main["width"]
    result = page.evaluate(CHECK)
    assert result["overflow"] <= 0 and not result["headers"], result


@pytest.fixture
def fleet(transactional_db):
    """A 2,000-node cluster of real machines (384 threads the largest), pinned pods on a third of them."""
    from numaweb.inventory.large_demo import build_large_demo

    return build_large_demo("fleet", 2000, 500)


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_hold_their_layout_at_2000_nodes(page: Page, live_server, fleet, width):
    page.set_viewport_size({"width": width, "height": 900})
    nodes = Node.objects.filter(cluster=fleet)
    epyc = nodes.filter(name__startswith="epyc384").first()
    opteron = nodes.filter(name__startswith="opteron96").first()
    running = nodes.filter(allocations__isnull=False).values_list("allocations__pod", flat=True).first()
    urls = {"dashboard": "/", "cluster map": f"/clusters/{fleet.pk}/map", "pod search": f"/pods/?q={running}",
            "pod search, a namespace": "/pods/?q=fleet/", "384-thread node": f"/nodes/{epyc.pk}/",
            "96-thread node": f"/nodes/{opteron.pk}/"}
    problems = {}
    for name, url in urls.items():
        page.goto(live_server.url + url)
        result = page.evaluate(CHECK)
        if result["overflow"] > 0 or result["headers"]:
            problems[name] = result
    assert not problems, json.dumps(problems, indent=1)
    expect(page.locator("#grid [data-cpu]")).to_have_count(opteron.num_cpus)


@pytest.mark.parametrize("width", WIDTHS)
def test_rejected_pod_pages_hold_their_layout(page: Page, live_server, demo, width):
    from numaweb.inventory.models import Cluster, RejectedPod
    from numaweb.inventory.snapshot import import_snapshot
    from tests.snapshot.rejected_snapshot import as_yaml, every_reason

    cluster = Cluster.objects.create(name="rejected")
    import_snapshot(cluster, as_yaml(every_reason()))
    train = RejectedPod.objects.get(cluster=cluster, name="train-worker-0")
    page.set_viewport_size({"width": width, "height": 900})
    problems = {}
    pages = {"rejected pod": f"/rejected/{train.pk}/", "cluster's rejected pods": f"/clusters/{cluster.pk}/rejected",
             "node with rejected pods": f"/nodes/{train.node_id}/", "pod search": "/pods/?q=ml"}
    for name, url in pages.items():
        page.goto(live_server.url + url)
        result = page.evaluate(CHECK)
        if result["overflow"] > 0 or result["headers"]:
            problems[name] = result
    assert not problems, json.dumps(problems, indent=1)
