"""The cluster map in a browser: one visible mark per node, drawn inside the page, and a click on a mark
opens that node's page (a static script: the Content-Security-Policy allows no inline one)."""

import pytest
from playwright.sync_api import Page, expect

from numaweb.inventory.models import Node

pytestmark = pytest.mark.browser


def test_one_mark_per_node_and_a_click_opens_the_node(page: Page, live_server, demo):
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/")
    page.click(f'a[data-map="{demo.name}"]')
    marks = page.locator("#cluster-map rect[data-id]")
    nodes = dict(Node.objects.filter(cluster=demo).values_list("pk", "name"))
    expect(marks).to_have_count(len(nodes))
    drawn = marks.evaluate_all("""els => els.map(e => { const b = e.getBoundingClientRect();
        return {id: +e.dataset.id, w: b.width, h: b.height, right: b.right}; })""")
    assert sorted(m["id"] for m in drawn) == sorted(nodes)
    width = page.evaluate("document.documentElement.clientWidth")
    assert all(m["w"] > 2 and m["h"] > 2 and m["right"] <= width for m in drawn)
    target = Node.objects.get(cluster=demo, name="srv-gpu-1")
    page.locator(f'#cluster-map rect[data-id="{target.pk}"]').click()
    page.wait_for_url(f"**/nodes/{target.pk}/")
    expect(page.locator("h1")).to_contain_text("srv-gpu-1")
