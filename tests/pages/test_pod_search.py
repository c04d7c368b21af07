"""Find any pod: `GET /api/pods/` and the search page answer what the node page shows for the pod (node,
NUMA nodes, CPUs), who wrote it, and its latest session placement; the NUMA column of the node page's
"who holds what" and of the session's pods table."""

import pytest
from django.urls import reverse

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Node
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from scheduler_core.model.cpuset import CPUSet
from tests.pages.helpers import parse

pytestmark = pytest.mark.django_db


def _node_page_rows(client, node: Node) -> dict[str, dict[str, str]]:
    """The node page's "who holds what": per pod, the NUMA and CPU cells' data attributes."""
    html = client.get(reverse("pages:node", args=[node.pk])).content.decode()
    rows, pod = {}, None
    for tag, attrs in parse(html).elements:
        if tag == "tr" and "data-owner" in attrs:
            pod = attrs["data-owner"]
            rows[pod] = {}
        elif tag == "td" and pod is not None and ("data-numa" in attrs or "data-cpus" in attrs):
            rows[pod].update({k: v for k, v in attrs.items() if k in ("data-numa", "data-cpus")})
    return rows


def test_api_answers_what_the_node_page_shows(client, demo):
    node = Node.objects.get(cluster=demo, name="srv-gpu-1")
    # a second holder whose memory sits on another NUMA node than its CPUs
    engine = inventory.to_engine(node, node.allocations.all())
    two = list(CPUSet(engine.free_cpus & engine.topology.numa_cpus[2]))[:2]  # two free CPUs of NUMA node 2
    inventory.add_allocation(node, pod="team/mem-pod", container="c", cpus=",".join(map(str, two)),
                             memory={"3": {"memory": 2 << 30}}, origin=Allocation.SCHEDULED)
    shown = _node_page_rows(client, node)
    assert set(shown) == set(node.allocations.values_list("pod", flat=True))
    topo = inventory.topology_of(node)
    for pod, cells in shown.items():
        body = client.get("/api/pods/", {"q": pod, "cluster": demo.pk}).json()
        [match] = [m for m in body["results"] if m["pod"] == pod]
        assert match["node"]["name"] == node.name and match["cluster"]["name"] == demo.name
        assert match["cpus"] == cells["data-cpus"]
        assert ",".join(map(str, match["numa"])) == cells["data-numa"]
        cpus = CPUSet.parse(match["cpus"]).mask
        cpu_numa = {n for n, mask in topo.numa_cpus.items() if mask & cpus}
        assert cpu_numa <= set(match["numa"])
    mem = client.get("/api/pods/", {"q": "team/mem"}).json()["results"][0]
    assert mem["numa"] == [2, 3] and mem["memory"] == {"3": {"memory": 2 << 30}}
    assert mem["written_by"] == [{"writer": "admin", "session": None}]
    seed = client.get("/api/pods/", {"q": "fb15e10a"}).json()
    assert seed["count"] == 1 and seed["results"][0]["written_by"] == [{"writer": "import", "session": None}]


def test_job_pods_are_found_by_job_and_namespace_with_their_last_placement(client, demo):
    body = client.get("/api/pods/", {"q": "mpi-ring"}).json()
    assert [m["pod"] for m in body["results"]] == [f"default/mpi-ring-rank-{i}" for i in range(4)]
    assert all(m["node"] is None and m["last_placement"] is None for m in body["results"])
    assert client.get("/api/pods/", {"q": "mpi-ring-rank-3"}).json()["count"] == 1
    job = Job.objects.get(name="train-gpu")
    session = services.start_session(demo, "volcano", False, [job])
    services.execute_session(session.pk)
    body = client.get("/api/pods/", {"q": "train-gpu", "cluster": demo.pk}).json()
    assert body["count"] == 2
    for m in body["results"]:
        held = Allocation.objects.filter(pod=m["pod"])
        node = held[0].node
        assert m["job"] == {"id": job.pk, "name": "train-gpu", "task": "worker"}
        assert m["node"]["name"] == node.name and m["written_by"] == [{"writer": "session", "session": session.pk}]
        assert m["cpus"] == str(CPUSet.parse(",".join(a.cpus for a in held)))
        assert m["devices"] == {"nvidia.com/gpu": sorted(d for a in held for d in a.devices["nvidia.com/gpu"])}
        placement = m["last_placement"]
        assert placement["session"] == session.pk and placement["node"] == node.name
        assert placement["hint_table"].endswith(f"/sessions/{session.pk}/?pod={placement['index']}#hint-table")
        assert _node_page_rows(client, node)[m["pod"]]["data-numa"] == ",".join(map(str, m["numa"]))
    # the session's pods table carries the same NUMA nodes
    html = client.get(reverse("pages:session", args=[session.pk])).content.decode()
    numa = {a["data-pod"]: None for _t, a in parse(html).elements if "data-pod" in a and "data-index" in a}
    pod_rows = [a for t, a in parse(html).elements if t == "td" and "data-numa" in a]
    assert len(pod_rows) == len(numa) == 2
    assert sorted(a["data-numa"] for a in pod_rows) == sorted(",".join(map(str, m["numa"])) for m in body["results"])


def test_search_page_and_navigation_box(client, demo):
    html = client.get(reverse("home")).content.decode()
    assert 'class="nav-search"' in html and f'action="{reverse("pages:pods")}"' in html
    html = client.get(reverse("pages:pods"), {"q": "777870b5"}).content.decode()
    rows = [a for t, a in parse(html).elements if t == "tr" and "data-pod" in a]
    node = Node.objects.get(cluster=demo, name="srv-gpu-1")
    api = client.get("/api/pods/", {"q": "777870b5"}).json()["results"][0]
    assert len(rows) == 1 and rows[0]["data-node"] == node.name
    assert (rows[0]["data-cpus"], rows[0]["data-numa"]) == (api["cpus"], ",".join(map(str, api["numa"])))
    assert 'data-count="0"' in client.get(reverse("pages:pods"), {"q": "no-such-pod"}).content.decode()


@pytest.mark.parametrize(("params", "field"), [({"q": "x", "cluster": "one"}, "cluster"),
                                               ({"q": "x", "limit": "0"}, "limit"), ({"q": "x" * 600}, "q"),
                                               # digits to str.isdigit(), not to int(): once a 500
                                               ({"q": "x", "cluster": "²"}, "cluster"),
                                               ({"q": "x", "limit": "5²"}, "limit")])
def test_bad_queries_answer_400_naming_the_field(client, demo, params, field):
    response = client.get("/api/pods/", params)
    assert response.status_code == 400 and field in response.json()


def test_search_needs_a_login(anon_client, demo):
    assert anon_client.get("/api/pods/", {"q": "x"}).status_code == 401
    assert anon_client.get(reverse("pages:pods"), {"q": "x"}).status_code == 302
