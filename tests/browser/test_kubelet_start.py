"""Will the kubelet start? In a real browser: the node page's check form with the node's checkpoint and a
planned config.yaml widening reservedSystemCPUs onto a pinned pod's CPU — the kubelet's refusal, the next
step and the pods that move; then the node's settings taken from a config.yaml."""

import pytest
from playwright.sync_api import Page, expect

from numaweb.inventory.models import Cluster, Node
from tests.snapshot.test_kubelet_start_web import CONFIG, _reserved_0_to_0_1
from tests.web.helpers import make_node

pytestmark = pytest.mark.browser


def _file(name: str, text: str) -> dict:
    return {"name": name, "mimeType": "application/octet-stream", "buffer": text.encode()}


def test_the_node_page_says_the_kubelet_would_refuse_and_what_to_do(page: Page, live_server, transactional_db):
    s = _reserved_0_to_0_1(Cluster.objects.create(name="prod"))
    page.goto(f"{live_server.url}/nodes/{s.node.pk}/")
    page.set_input_files("#id_cpu_state", _file("cpu_manager_state", s.cpu))
    page.set_input_files("#id_kubelet_config", _file("config.yaml", s.config))
    page.click("section.state-check-link button[type=submit]")
    verdict = page.locator("section.kubelet-start")
    expect(verdict).to_have_attribute("data-starts", "false")
    expect(verdict.locator("pre.kubelet-text")).to_have_text(s.message)
    expect(verdict.locator(".next-step")).to_contain_text("drain the node")
    expect(verdict.locator(".next-step")).to_contain_text("delete /var/lib/kubelet/cpu_manager_state")
    expect(verdict.locator("code.pod-to-move")).to_have_text(s.pinned)


def test_the_node_page_takes_the_settings_from_a_config(page: Page, live_server, transactional_db):
    node = make_node(Cluster.objects.create(name="prod"), "n1")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    page.set_input_files("#kubelet-config-form input[type=file]", _file("config.yaml", CONFIG))
    page.click("#kubelet-config-form button[type=submit]")
    expect(page.locator("section.kubelet-config")).to_contain_text("Topology Manager restricted (pod scope)")
    expect(page.locator("section.kubelet-config")).to_contain_text("kube+system reserved CPU 1500m")
    assert Node.objects.get(pk=node.pk).topology_manager_policy == "restricted"
