"""Accessibility: axe-core (the axe.min.js that axe-playwright-python ships) runs in the browser on every page of
the site, as a viewer (no forms), an operator and an admin (every form), and on the states a page reaches
without reloading (a what-if answered, a session's pod chosen). No violation of impact critical or serious is
allowed: unlabelled controls, interactive elements nested in others, text below 4.5:1 contrast, ...
A failure lists each rule with its impact, the elements (CSS targets) and axe's summary of what to fix."""

from __future__ import annotations

from importlib.resources import files

import pytest
from playwright.sync_api import Page, expect

from numaweb.comparisons import services as comparisons
from numaweb.inventory.models import Cluster, Node, RejectedPod
from numaweb.jobs.models import Job
from numaweb.room import services as room
from numaweb.room.models import RoomPlan
from numaweb.scheduling import services
from scheduler_core.scheduler.compare import Variant

pytestmark = pytest.mark.browser

AXE = (files("axe_playwright_python") / "axe.min.js").read_text()
BLOCKING = ("critical", "serious")
RANKS = ("viewer", "operator", "admin")
#: the pages a lower role is refused (403); every other page is for every role
NEEDS = {"check-state form": "operator", "import": "admin"}


def violations(page: Page) -> list[str]:
    """axe's critical and serious violations on the page as it stands, one line per rule and element. The script
    is evaluated over the DevTools protocol, which the page's Content-Security-Policy does not govern."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE)
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['impact']} {v['id']}: {' '.join(map(str, n['target']))}: {n['failureSummary'].splitlines()[1].strip()}"
            for v in result["violations"] if v["impact"] in BLOCKING for n in v["nodes"]]


@pytest.fixture
def site(demo):
    """The demo with a finished session, a finished comparison of three variants, a make-room answer, and a
    cluster of pods the kubelet rejected: a URL for every page, each with something in it."""
    from numaweb.inventory.snapshot import import_snapshot
    from tests.snapshot.rejected_snapshot import as_yaml, every_reason
    from tests.web.helpers import make_job
    from tests.web.room_rows import fragmented_rows

    session = services.start_session(demo, "volcano", True, list(Job.objects.filter(cluster=demo)))
    services.execute_session(session.pk)
    comparison = comparisons.create_comparison(demo, [Variant("volcano"), Variant("aligned"), Variant("unaware")])
    for variant in comparison.variants.all():
        comparisons.execute_variant(variant.pk)
    frag = fragmented_rows(nodes=2)
    plan = RoomPlan.objects.create(**room.parse_request(frag, {"job": make_job(
        "train", cpus="16", replicas=2, policy="single-numa-node", cluster=frag).pk}))
    room.execute(plan.pk)
    rejected = Cluster.objects.create(name="rejected")
    import_snapshot(rejected, as_yaml(every_reason()))
    pod = RejectedPod.objects.get(cluster=rejected, name="train-worker-0")
    gpu = Node.objects.get(name="srv-gpu-1")
    job = Job.objects.get(name="mpi-ring")
    nodes = {f"node {n.name}": f"/nodes/{n.pk}/" for n in Node.objects.filter(cluster=demo)}
    return {"dashboard": "/", **nodes, "node with rejected pods": f"/nodes/{pod.node_id}/",
            "check-state form": f"/nodes/{gpu.pk}/check-state",
            "jobs": "/jobs/", "job": f"/jobs/{job.pk}/",
            "sessions": "/sessions/", "session": f"/sessions/{session.pk}/",
            "session, per-node hint rows": f"/sessions/{session.pk}/?expand=1",
            "session pod": f"/sessions/{session.pk}/pods/0/",
            "comparisons": "/comparisons/", "comparison": f"/comparisons/{comparison.pk}/",
            "make room": f"/make-room/{plan.pk}/", "import": "/clusters/import",
            "cluster map": f"/clusters/{demo.pk}/map",
            "pod search": "/pods/?q=default", "rejected pods": f"/clusters/{rejected.pk}/rejected",
            "rejected pod": f"/rejected/{pod.pk}/", "help": "/help/",
            "admin: a node's history": f"/admin/inventory/node/{gpu.pk}/history/",
            "admin: a cluster's history": f"/admin/inventory/cluster/{demo.pk}/history/"}


@pytest.mark.parametrize("role", RANKS)
def test_every_page_has_no_serious_violation(page: Page, live_server, site, make_user, role):
    from numaweb.access.sessions import session_cookie

    page.context.clear_cookies()
    page.context.add_cookies([session_cookie(make_user(f"axe-{role}", role), live_server.url)])
    found = {}
    for name, url in site.items():
        needs = "admin" if url.startswith("/admin/") else NEEDS.get(name, "viewer")
        if RANKS.index(role) < RANKS.index(needs):
            continue  # a 403 page
        page.goto(live_server.url + url)
        found[name] = violations(page)
    report = "\n".join(f"{name} ({url}):\n  " + "\n  ".join(found[name])
                       for name, url in site.items() if found.get(name))
    assert not report, f"axe, as {role}:\n{report}"


def test_pages_reached_without_reload_have_no_serious_violation(page: Page, live_server, demo):
    """A what-if's answer on the node page, and a CPU's detail; the login page to a visitor."""
    node = Node.objects.get(name="srv-gpu-1")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    page.fill("#id_cpu", "6")
    page.fill("#id_memory", "2Gi")
    page.click("#whatif-form button[type=submit]")
    expect(page.locator(".whatif-hints")).to_be_visible()
    page.locator("#grid [data-state=used]").first.click()
    expect(page.locator("#cpu-detail")).not_to_be_empty()
    found = violations(page)
    page.context.clear_cookies()
    page.goto(live_server.url + "/login/")
    found += violations(page)
    assert not found, "\n".join(found)
