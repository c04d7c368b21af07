"""The pages in a real browser: dashboard, node grid, what-if, inline job errors, and a session run
by a real Celery worker whose progress is polled until the hint table replaces it, with no reload."""

import pytest
from playwright.sync_api import Page, expect

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Node
from numaweb.scheduling import services
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.pods import Container, Pod

pytestmark = pytest.mark.browser

CELL_ATTRS = """cells => cells.map(c => ({cpu: +c.dataset.cpu, core: +c.dataset.core, numa: +c.dataset.numa,
    socket: +c.dataset.socket, owner: c.dataset.owner, state: c.dataset.state, hl: c.dataset.highlight || ""}))"""


def test_dashboard_and_node_grid(page: Page, live_server, demo):
    page.goto(live_server.url + "/")
    cards = page.locator("li.card[data-node-id]")
    expect(cards).to_have_count(Node.objects.count())
    names = sorted(cards.evaluate_all("els => els.map(e => e.dataset.node)"))
    assert names == sorted(Node.objects.values_list("name", flat=True))
    # filter over HTMX: only best-effort nodes stay, the page is not reloaded
    page.evaluate("window.__marker = 'kept'")
    page.select_option("select[name=policy]", "best-effort")
    expect(cards).to_have_count(Node.objects.filter(topology_manager_policy="best-effort").count())
    assert page.evaluate("window.__marker") == "kept"

    node = Node.objects.get(name="srv-gpu-1")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    cells = page.locator("#grid [data-cpu]").evaluate_all(CELL_ATTRS)
    engine = inventory.to_engine(node, node.allocations.all())
    topo = engine.topology
    assert len(cells) == len(topo.cpus) == 64
    owners = {cpu: a.pod for a in node.allocations.all() for cpu in CPUSet.parse(a.cpus)}
    for c in cells:
        cpu = topo.cpu_info[c["cpu"]]
        assert (c["core"], c["numa"], c["socket"]) == (cpu.core, cpu.numa, cpu.socket)
        assert c["owner"] == owners.get(cpu.id, "")
        assert c["state"] == ("reserved" if cpu.id in engine.reserved_cpus else "used" if cpu.id in owners else "free")
    # click a used CPU: its detail (owner) appears
    used = next(c for c in cells if c["state"] == "used")
    page.locator(f'#grid [data-cpu="{used["cpu"]}"]').click()
    expect(page.locator("#cpu-detail")).to_contain_text(used["owner"])


def test_whatif_shows_hint_table_and_highlights_cpus(page: Page, live_server, demo):
    node = Node.objects.get(name="node-2")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    page.fill("#id_cpu", "6")
    page.fill("#id_memory", "2Gi")
    page.click("#whatif-form button[type=submit]")
    expect(page.locator(".whatif-hints")).to_be_visible()
    expect(page.locator(".whatif-hints")).to_contain_text("{01: T}")
    engine = inventory.to_engine(node, node.allocations.all())
    expected = admit_pod(engine, Pod("what-if", (Container.guaranteed("what-if", 6000, 2 * 2**30),)), commit=False)
    lit = page.locator('#grid [data-highlight="1"]')
    expect(lit).to_have_count(6)
    assert sorted(lit.evaluate_all("els => els.map(e => +e.dataset.cpu)")) == list(expected.cpus)


def test_bad_job_shows_inline_error(page: Page, live_server, demo):
    page.goto(live_server.url + "/jobs/")
    page.evaluate("window.__marker = 'kept'")
    page.fill("#id_name", "broken")
    page.fill("#job-form #id_cpu", "1.5x")
    page.click("#job-form button[type=submit]")
    error = page.locator('#job-form [data-field="cpu"] .field-error')
    expect(error).to_contain_text("is not a quantity")
    expect(page.locator('#job-form [data-field="name"] .field-error')).to_have_count(0)
    assert page.evaluate("window.__marker") == "kept"


def test_session_progress_then_hint_table_without_reload(page: Page, live_server, demo, worker, monkeypatch):
    # hold the worker a moment between computing and committing, so the progress bar is seen and polled
    import time

    monkeypatch.setattr(services, "checkpoint", lambda stage, s: time.sleep(1.2) if stage == "computed" else None)
    page.goto(live_server.url + "/jobs/")
    page.evaluate("""() => { window.__marker = 'kept'; window.__polls = 0; window.__sawProgress = false;
        document.body.addEventListener('htmx:afterSwap', () => {
            if (document.querySelector('.session progress')) window.__sawProgress = true; });
        document.body.addEventListener('htmx:afterRequest', e => {
            if (e.detail.pathInfo.requestPath.includes('/progress')) window.__polls += 1; }); }""")
    page.get_by_label("pick default/vj-test for the session").check()
    expect(page.locator("#session-form input[name=scope][value=picked]")).to_be_checked()  # static/js/jobs.js
    page.select_option("#session-form select[name=profile]", "volcano")
    page.click("#session-form button[type=submit]")
    section = page.locator("section.session")
    expect(section).to_have_attribute("data-status", "done", timeout=20000)
    expect(page.locator("#hint-table")).to_be_visible()
    assert page.evaluate("window.__marker") == "kept"  # no full page load
    assert page.evaluate("window.__sawProgress") is True
    assert page.evaluate("window.__polls") >= 1
    assert "/sessions/" in page.url  # hx-push-url
    assert section.get_attribute("hx-trigger") is None  # polling stopped
    # seed 001: the 20-CPU best-effort task goes to node-3; node-2's row explains its two-NUMA hint
    expect(page.locator("[data-chosen]")).to_have_text("node-3")
    row = page.locator('tr.hint-row[data-node="node-2"]')
    expect(row).to_contain_text("{11: T}")
    expect(row).to_contain_text("needs 2 NUMA nodes (0+1)")
    expect(page.locator('#pod-grid [data-highlight="1"]')).to_have_count(20)
    # filter to failed rows over HTMX
    page.select_option("#hint-table select[name=show]", "failed")
    expect(page.locator('tr.hint-row[data-outcome="passed"]')).to_have_count(0)
    expect(page.locator("tr.hint-row").first).to_be_visible()
    assert page.evaluate("window.__marker") == "kept"
