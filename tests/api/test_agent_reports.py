"""`POST /api/agent/reports/`: node agents' reports applied whole or not at all, observed allocations in place of
the replay, the state check, staleness, and the agent role's one right."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.inventory.agent import agent_status
from numaweb.inventory.models import Allocation, Cluster, Node, NodeReport
from scheduler_core.agent import REPORT_KIND
from scheduler_core.model.topology import synthetic
from tests.pages.helpers import map_data
from tests.web.helpers import make_job

pytestmark = pytest.mark.django_db
URL = "/api/agent/reports/"
POD = "5f0c6f5e-1111-2222-3333-444455556666"
CONFIG = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
reservedSystemCPUs: "0"
topologyManagerPolicy: single-numa-node
"""


def cpu_state(entries: dict[str, dict[str, str]], default: str) -> str:
    return json.dumps({"policyName": "static", "defaultCpuSet": default, "entries": entries, "checksum": 1})


def report(cluster: str = "prod", node: str = "node-1", state: str | None = None, time: str = "2026-11-27T10:00:00Z",
           **kubelet: str | None) -> dict:
    return {"kind": REPORT_KIND, "cluster": cluster, "node": node, "time": time,
            "agent": {"version": "1", "host": node}, "topology": synthetic(1, 2, 4, 1).to_dict(),
            "pci_devices": [], "notes": [],
            "kubelet": {"config": CONFIG, "cpu_manager_state": state, "memory_manager_state": None,
                        "device_checkpoint": None, **kubelet}}


@pytest.fixture(autouse=True)
def _reports_back_to_back(settings):
    """These tests send one node's reports in quick succession: the per-node interval is tested on its own."""
    settings.NUMAWEB_AGENT_MIN_INTERVAL = 0


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="prod")


@pytest.fixture
def agent_api(cluster, capsys):
    call_command("create_user", "agent-prod", "--role", "agent", "--cluster", "prod")
    key = capsys.readouterr().out.split()[-1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_report_creates_the_node_with_observed_allocations_and_checks_them(agent_api):
    # the model puts a 2-CPU container on CPUs 1-2 (CPU 0 reserved): the kubelet agrees
    state = cpu_state({POD: {"app": "1-2"}}, "0,3-7")
    response = agent_api.post(URL, report(state=state), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["changed"] and body["created"] and body["observed"] == 1
    node = Node.objects.get(name="node-1")
    assert node.num_cpus == 8 and node.num_numa_nodes == 2 and node.source_format == "agent"
    assert node.topology_manager_policy == "single-numa-node" and node.reserved_cpus == "0"
    row = node.allocations.get()
    assert (row.pod, row.container, row.cpus, row.origin) == (POD, "app", "1-2", Allocation.OBSERVED)
    assert row.observed_at.isoformat() == "2026-11-27T10:00:00+00:00"
    assert body["check"]["match"] and body["check"]["disagreements"] == 0


def test_an_unchanged_report_writes_nothing(agent_api):
    state = cpu_state({POD: {"app": "1-2"}}, "0,3-7")
    agent_api.post(URL, report(state=state), format="json")
    node = Node.objects.get(name="node-1")
    history = node.history.count(), Allocation.history.count()
    generation = node.generation
    again = agent_api.post(URL, report(state=state, time="2026-11-27T10:01:00Z"), format="json")
    assert again.status_code == 200 and again.json()["changed"] is False
    node.refresh_from_db()
    assert node.generation == generation and (node.history.count(), Allocation.history.count()) == history
    assert NodeReport.objects.get(node=node).reported_at.minute == 1  # when the agent was last heard


def test_a_checkpoint_without_the_container_removes_it(agent_api):
    agent_api.post(URL, report(state=cpu_state({POD: {"app": "1-2"}}, "0,3-7")), format="json")
    node = Node.objects.get(name="node-1")
    generation = node.generation
    response = agent_api.post(URL, report(state=cpu_state({}, "0-7")), format="json")
    assert response.status_code == 200 and response.json()["changed"]
    node.refresh_from_db()
    assert not node.allocations.exists() and node.generation > generation


def test_observed_allocations_replace_the_replay_and_release_the_pod_elsewhere(agent_api, cluster):
    agent_api.post(URL, report(state=cpu_state({}, "0-7")), format="json")
    node = Node.objects.get(name="node-1")
    node.snapshot = {"pods": {POD: "default/web"}}  # the last snapshot named the pod's UID
    node.save()
    Allocation.objects.create(node=node, pod="default/old", container="app", cpus="4-5", origin=Allocation.REPLAYED)
    Allocation.objects.create(node=node, pod="default/batch", container="c", cpus="6", origin=Allocation.SCHEDULED)
    other = Node.objects.create(cluster=cluster, name="node-2", topology=node.topology, fingerprint=node.fingerprint)
    Allocation.objects.create(node=other, pod="default/web", container="app", cpus="1", origin=Allocation.SCHEDULED)
    other_generation = other.generation
    response = agent_api.post(URL, report(state=cpu_state({POD: {"app": "1-2"}}, "0,3-7")), format="json")
    assert response.status_code == 200, response.json()
    assert sorted(node.allocations.values_list("pod", "cpus", "origin")) == [
        ("default/batch", "6", "scheduled"), ("default/web", "1-2", "observed")]
    assert not other.allocations.exists()
    other.refresh_from_db()
    assert other.generation > other_generation
    assert any("released from node node-2" in n for n in response.json()["notes"])


def test_disagreements_of_the_state_check_are_kept_and_shown(agent_api):
    # the kubelet pinned CPUs 6-7 (NUMA 1), the model would have chosen 1-2: a disagreement
    response = agent_api.post(URL, report(state=cpu_state({POD: {"app": "6-7"}}, "0-5")), format="json")
    check = response.json()["check"]
    assert not check["match"] and check["disagreements"] >= 1
    status = agent_status(NodeReport.objects.get())
    assert status["check"]["containers"][0]["actual_cpus"] == "6-7"
    assert status["check"]["containers"][0]["predicted_cpus"] == "1-2"


def test_a_bad_checkpoint_is_refused_whole(agent_api):
    response = agent_api.post(URL, report(state='{"policyName": 3}'), format="json")
    assert response.status_code == 400 and "kubelet.cpu_manager_state" in response.json()
    assert not Node.objects.exists()
    response = agent_api.post(URL, report(state=cpu_state({POD: {"app": "99"}}, "0-7")), format="json")
    assert response.status_code == 400 and "kubelet" in response.json()
    assert not Node.objects.exists() and not NodeReport.objects.exists()
    bad_config = agent_api.post(URL, report(config="kind: KubeletConfiguration\napiVersion: v9\n"), format="json")
    assert bad_config.status_code == 400 and "kubelet.config" in bad_config.json()
    assert agent_api.post(URL, {**report(), "node": "Node_1"}, format="json").json().keys() == {"node"}
    for when in ("2026-13-45T00:00:00Z", "yesterday", "2026-11-27T10:00:00"):
        assert agent_api.post(URL, report(time=when), format="json").json().keys() == {"time"}, when


def test_an_agent_token_reports_only_for_its_cluster_and_reads_nothing(agent_api, cluster):
    make_job("j1")
    Cluster.objects.create(name="staging")
    refused = agent_api.post(URL, report(cluster="staging"), format="json")
    assert refused.status_code == 403 and "prod" in refused.json()["detail"]
    for url in ("/api/jobs/", "/api/nodes/", "/api/clusters/", "/api/pods/?q=x", f"/api/clusters/{cluster.pk}/"):
        assert agent_api.get(url).status_code == 403, url
    assert agent_api.post("/api/jobs/", {}, format="json").status_code == 403


def test_a_viewer_cannot_send_reports(viewer_api, cluster):
    assert viewer_api.post(URL, report(), format="json").status_code == 403


def test_create_user_binds_an_agent_to_an_existing_cluster(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--cluster: an agent needs"):
        call_command("create_user", "a1", "--role", "agent")
    with pytest.raises(CommandError, match="no cluster named 'nope'"):
        call_command("create_user", "a1", "--role", "agent", "--cluster", "nope")
    with pytest.raises(CommandError, match="only an agent is bound"):
        call_command("create_user", "v1", "--role", "viewer", "--cluster", "nope")


def test_a_silent_agent_makes_its_node_stale(agent_api, settings):
    agent_api.post(URL, report(state=cpu_state({}, "0-7")), format="json")
    row = NodeReport.objects.get()
    assert agent_status(row)["stale"] is False
    settings.NUMAWEB_AGENT_STALE_SECONDS = 60
    assert agent_status(row, now=timezone.now() + timedelta(seconds=61))["stale"] is True
    token = Token.objects.get(user__username="agent-prod")
    assert token.user.groups.get().name == "agent"


def test_disagreements_and_staleness_show_on_every_view_of_the_node(agent_api, client, api, settings):
    agent_api.post(URL, report(state=cpu_state({POD: {"app": "6-7"}}, "0-5")), format="json")  # model: 1-2
    agent_api.post(URL, report(node="node-2", state=cpu_state({}, "0-7")), format="json")  # agrees
    node = Node.objects.get(name="node-1")
    # the node page: the agent's section, its verdict and the disagreeing container
    page = client.get(f"/nodes/{node.pk}/").content.decode()
    assert 'id="agent"' in page and "disagreement" in page and "6-7" in page and "observed" in page
    assert "stale:" not in page
    # the API: the node's agent field, the allocation's origin and report time
    body = api.get(f"/api/nodes/{node.pk}/").json()
    assert body["agent"]["disagreements"] >= 1 and body["agent"]["stale"] is False
    assert body["agent"]["check"]["containers"][0]["actual_cpus"] == "6-7"
    allocation = api.get(f"/api/allocations/?node={node.pk}").json()
    rows = allocation["results"] if isinstance(allocation, dict) else allocation
    assert rows[0]["origin"] == "observed" and rows[0]["observed_at"].startswith("2026-11-27T10:00:00")
    # pod search: who wrote it (the agent) and this pod's disagreement
    found = api.get(f"/api/pods/?q={POD[:8]}").json()["results"][0]
    assert found["written_by"] == [{"writer": "agent", "session": None}]
    assert found["agent"]["disagreements"][0]["container"] == "app" and found["agent"]["stale"] is False
    # the cluster map coloured by disagreements: node-1 in a higher bin than node-2
    cluster = node.cluster_id
    svg = client.get(f"/clusters/{cluster}/map?measure=agent").content.decode()
    marks = {pk: f"m{b}" for g in map_data(svg)["groups"] for pk, b in zip(g["ids"], g["bins"], strict=True)}
    other = Node.objects.get(name="node-2")
    assert marks[node.pk] != "m0" and marks[other.pk] == "m0"
    # silent longer than the setting: stale everywhere
    NodeReport.objects.filter(node=node).update(received_at=timezone.now() - timedelta(seconds=600))
    settings.NUMAWEB_AGENT_STALE_SECONDS = 300
    assert "stale:" in client.get(f"/nodes/{node.pk}/").content.decode()
    assert api.get(f"/api/nodes/{node.pk}/").json()["agent"]["stale"] is True
    assert api.get(f"/api/pods/?q={POD[:8]}").json()["results"][0]["agent"]["stale"] is True
    svg = client.get(f"/clusters/{cluster}/map").content.decode()
    assert [g["marks"] for g in map_data(svg)["groups"] if node.pk in g["ids"]] == [{str(node.pk): "stale"}]
    assert "agent stale" in client.get(f"/pods/?q={POD[:8]}").content.decode()


def test_on_a_node_an_agent_reports_a_snapshot_import_keeps_the_agents_truth(agent_api):
    """The agent wins over a snapshot on its node: the topology and kubelet settings stay the agent's, the pod
    the kubelet holds stays observed (now named by the snapshot) and only the other running pods are replayed."""
    from pathlib import Path

    snapshot = Path(__file__).resolve().parents[1] / "formats/data/snapshot/upstream-examples.yaml"
    call_command("import_cluster", str(snapshot), "--cluster", "prod")
    cache = "0b6b8d4e-1111-4c1e-9a55-000000000003"  # default/cache, running on node1
    big = {**report(node="node1", state=cpu_state({cache: {"redis": "40-43"}}, "0-39,44-111")),
           "topology": synthetic(1, 4, 28, 1).to_dict()}
    assert agent_api.post(URL, big, format="json").status_code == 200
    node = Node.objects.get(name="node1")
    # the snapshot named the UID; its replayed pods on node1 gave way to the kubelet's truth
    assert node.num_cpus == 112 and list(node.allocations.values_list("pod", "origin")) == [
        ("default/cache", "observed")]
    call_command("import_cluster", str(snapshot), "--cluster", "prod")
    node.refresh_from_db()
    assert node.num_cpus == 112 and node.source_format == "agent" and node.topology_manager_policy == (
        "single-numa-node")
    rows = {(a.pod, a.origin): a.cpus for a in node.allocations.all()}
    assert rows[("default/cache", "observed")] == "40-43"
    assert not any(pod == "default/cache" and origin == "replayed" for pod, origin in rows)
    assert {pod for pod, origin in rows if origin == "replayed"} == {"ml/train-worker-0", "ml/train-worker-1"}


def test_a_snapshot_names_the_pods_an_agent_reported_by_uid(agent_api):
    from pathlib import Path

    cache = "0b6b8d4e-1111-4c1e-9a55-000000000003"
    big = {**report(node="node1", state=cpu_state({cache: {"redis": "40-43"}}, "0-39,44-111")),
           "topology": synthetic(1, 4, 28, 1).to_dict()}
    assert agent_api.post(URL, big, format="json").status_code == 201
    assert list(Allocation.objects.values_list("pod", flat=True)) == [cache]
    snapshot = Path(__file__).resolve().parents[1] / "formats/data/snapshot/upstream-examples.yaml"
    call_command("import_cluster", str(snapshot), "--cluster", "prod")
    node = Node.objects.get(name="node1")
    assert list(node.allocations.filter(origin="observed").values_list("pod", "cpus")) == [("default/cache",
                                                                                          "40-43")]


def test_a_node_reporting_again_too_soon_is_told_to_wait(agent_api, settings):
    settings.NUMAWEB_AGENT_MIN_INTERVAL = 5
    assert agent_api.post(URL, report(state=cpu_state({}, "0-7")), format="json").status_code == 201
    again = agent_api.post(URL, report(state=cpu_state({}, "0-7")), format="json")
    assert again.status_code == 429 and 1 <= int(again["Retry-After"]) <= 5
    assert agent_api.post(URL, report(node="node-2", state=cpu_state({}, "0-7")), format="json").status_code == 201
    NodeReport.objects.update(received_at=timezone.now() - timedelta(seconds=6))
    assert agent_api.post(URL, report(state=cpu_state({}, "0-7")), format="json").status_code == 200


def test_the_dashboard_cards_say_stale_and_disagreements(agent_api, client):
    agent_api.post(URL, report(state=cpu_state({POD: {"app": "6-7"}}, "0-5")), format="json")
    html = client.get("/").content.decode()
    card = html[html.index('data-node="node-1"'):]
    assert "disagreement" in card[:3000] and "agent stale" not in card[:3000]
    NodeReport.objects.update(received_at=timezone.now() - timedelta(days=1))
    html = client.get("/").content.decode()
    assert "agent stale" in html[html.index('data-node="node-1"'):][:3000]
