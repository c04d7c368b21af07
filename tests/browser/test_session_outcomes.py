"""The kubelet-rejected pods of a session, one click away in a real browser (issue 31): among 60 unplaced pods
that fill the first page, the count "N rejected by the kubelet" links to exactly the pods the kubelet refused, and
the first of them opens with the kubelet's own message."""

import pytest
from playwright.sync_api import Page, expect

from numaweb.inventory.models import Cluster
from numaweb.scheduling import services
from tests.web.helpers import make_job, make_node

pytestmark = pytest.mark.browser


def test_one_click_lists_exactly_the_kubelet_rejected_pods(page: Page, live_server, transactional_db):
    cluster = Cluster.objects.create(name="kubelet")
    make_node(cluster, "a-smt", (1, 2, 2, 2), "single-numa-node", cpu_manager_options={"full-pcpus-only": "true"})
    make_node(cluster, "b-be", (2, 1, 4, 1), "best-effort")
    make_node(cluster, "c-snn", (1, 2, 4, 1), "single-numa-node")
    make_job("huge", cpus="64", replicas=60, policy="")  # 60 pods no node can take: the first page and more
    make_job("odd", cpus="1", policy="")
    make_job("wide", cpus="6", policy="")
    make_job("pair", cpus="3", replicas=3, policy="")
    session = services.execute_session(services.start_session(cluster, "volcano", True, None).pk)
    rejected = list(session.placements.filter(status="rejected").order_by("index").values_list("pod", flat=True))
    assert len(rejected) == 3 and session.pods_total == 65

    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    rows = page.locator("table.pods-table tr[data-index]")
    expect(rows).to_have_count(50)  # the first page: unplaced pods only
    assert not set(rows.evaluate_all("rs => rs.map(r => r.dataset.pod)")) & set(rejected)
    link = page.locator("#outcome-counts a[data-outcome-link=rejected]:not([data-reason])")
    expect(link).to_have_text("3 rejected by the kubelet")
    link.click()
    page.wait_for_url("**/sessions/*/?outcome=rejected*")
    expect(rows).to_have_count(3)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.pod)") == rejected
    expect(page.locator("table.pods-table caption")).to_contain_text("3 of 65 pods, rejected by the kubelet")
    panel = page.locator("#pod-detail")
    expect(panel).to_have_attribute("data-pod", rejected[0])
    expect(panel.locator("[data-kubelet-message]")).to_have_text(
        "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2")
    expect(panel.locator("[data-summary]")).not_to_contain_text("placed on")
    # the node's name is a link to its page
    panel.locator(".chosen-node a.node-link").click()
    page.wait_for_url("**/nodes/*/")
    expect(page.locator("h1")).to_contain_text("a-smt")
