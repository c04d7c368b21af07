"""Django admin: node kubelet settings as choices, topology validated by the engine on save (its
message as the form error), allocations checked, sessions read-only."""

import json

import pytest
from django.contrib.auth import get_user_model

from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.scheduling.models import SchedulingSession
from scheduler_core.model.topology import synthetic
from tests.web.helpers import make_node


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(user)
    return client


def node_form(cluster, **extra):
    data = {"cluster": cluster.pk, "name": "n1", "topology": json.dumps(synthetic(2, 1, 4, 1).to_dict()),
            "cpu_manager_policy": "static", "cpu_manager_options": "{}", "reserved_cpus": "",
            "reserved_cpu_milli": "0", "topology_manager_policy": "single-numa-node",
            "topology_manager_scope": "container", "topology_manager_options": "{}",
            "memory_manager_policy": "None", "reserved_memory": "{}", "numatopology": "on"}
    data.update(extra)
    return data


def test_add_node_through_admin(admin_client):
    cluster = Cluster.objects.create(name="c")
    page = admin_client.get("/admin/inventory/node/add/").content.decode()
    assert '<option value="single-numa-node">' in page and '<option value="restricted">' in page
    r = admin_client.post("/admin/inventory/node/add/", node_form(cluster))
    assert r.status_code == 302, r.content.decode()[-2000:]
    node = Node.objects.get()
    assert (node.num_cpus, node.num_numa_nodes, node.generation) == (8, 2, 1)
    assert node.fingerprint and node.imported_at


@pytest.mark.parametrize("change, words", [
    ({"topology": json.dumps({"cpus": [{"cpu": 0, "core": 0, "socket": 0}]})}, "CPU 0 has no NUMA node"),
    ({"topology_manager_options": json.dumps({"max-allowable-numa-nodes": "2"})}, "should not be less than 8"),
    ({"reserved_cpus": "0-99"}, "0-99"),
])
def test_engine_message_is_the_form_error(admin_client, change, words):
    cluster = Cluster.objects.create(name="c")
    r = admin_client.post("/admin/inventory/node/add/", node_form(cluster, **change))
    assert r.status_code == 200
    assert words in r.content.decode()
    assert not Node.objects.exists()


def test_edit_bumps_generation(admin_client):
    cluster = Cluster.objects.create(name="c")
    node = make_node(cluster, "n1")
    data = node_form(cluster, topology=json.dumps(node.topology), topology_manager_policy="restricted")
    r = admin_client.post(f"/admin/inventory/node/{node.pk}/change/", data)
    assert r.status_code == 302
    node.refresh_from_db()
    assert node.topology_manager_policy == "restricted" and node.generation == 2


def test_allocation_double_booking_refused(admin_client):
    node = make_node(Cluster.objects.create(name="c"), "n1")
    Allocation.objects.create(node=node, pod="default/a", cpus="0-1")
    r = admin_client.post("/admin/inventory/allocation/add/", {
        "node": node.pk, "pod": "default/b", "container": "", "cpus": "1-2", "memory": "{}", "devices": "{}",
        "origin": "scheduled"})
    assert r.status_code == 200 and "CPUs 1 of node n1 are held by default/a" in r.content.decode()
    assert Allocation.objects.count() == 1


def test_sessions_are_read_only(admin_client):
    session = SchedulingSession.objects.create(cluster=Cluster.objects.create(name="c"))
    assert admin_client.get("/admin/scheduling/schedulingsession/").status_code == 200
    assert admin_client.get("/admin/scheduling/schedulingsession/add/").status_code == 403
    page = admin_client.get(f"/admin/scheduling/schedulingsession/{session.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()


def test_admin_reruns_a_session_whose_worker_is_lost(admin_client, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.NUMAWEB_SESSION_STALE_SECONDS = 60
    cluster = Cluster.objects.create(name="c")
    now = timezone.now()
    live = SchedulingSession.objects.create(cluster=cluster, status="running", runs=1, heartbeat_at=now,
                                            worker="other-host:7")
    lost = SchedulingSession.objects.create(cluster=cluster, status="running", runs=1, worker="other-host:8",
                                            heartbeat_at=now - timedelta(seconds=61))
    r = admin_client.post("/admin/scheduling/schedulingsession/", {
        "action": "rerun", "_selected_action": [live.pk, lost.pk]}, follow=True)
    text = r.content.decode()
    assert f"Session {live.pk} is running on other-host:7" in text
    assert f"Queued again: session {lost.pk}" in text
    live.refresh_from_db()
    lost.refresh_from_db()
    assert live.status == "running" and lost.status == "pending"


def test_a_node_holding_allocations_does_not_move_cluster_in_the_admin(admin_client):
    cluster, other = Cluster.objects.create(name="c"), Cluster.objects.create(name="other")
    node = make_node(cluster, "n1")
    Allocation.objects.create(node=node, pod="default/a", cpus="0-1")
    data = node_form(other, topology=json.dumps(node.topology))
    r = admin_client.post(f"/admin/inventory/node/{node.pk}/change/", data)
    assert r.status_code == 200
    assert "node n1 holds 1 allocation(s) in cluster c; a node moves to cluster other only once it holds none" in (
        r.content.decode())
    node.refresh_from_db()
    assert node.cluster == cluster


def test_a_job_is_created_in_a_cluster_in_the_admin(admin_client):
    from numaweb.jobs.models import Job

    cluster = Cluster.objects.create(name="c")
    data = {"cluster": cluster.pk, "name": "adm", "namespace": "default", "queue": "default", "priority": "0",
            "min_available": "", "source_format": "json", "manifest": "", "tasks-TOTAL_FORMS": "0",
            "tasks-INITIAL_FORMS": "0", "tasks-MIN_NUM_FORMS": "0", "tasks-MAX_NUM_FORMS": "1000"}
    r = admin_client.post("/admin/jobs/job/add/", data)
    assert r.status_code == 302, r.content.decode()[-2000:]
    job = Job.objects.get(name="adm")
    assert job.cluster == cluster
    again = admin_client.post("/admin/jobs/job/add/", data)
    assert again.status_code == 200 and Job.objects.filter(name="adm").count() == 1
    page = admin_client.get(f"/admin/jobs/job/{job.pk}/change/").content.decode()
    assert 'name="cluster"' not in page  # chosen at creation: its pods' allocations live there
