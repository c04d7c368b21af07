"""The pods that matter, one click away (issue 31): the session page and `GET /api/sessions/<id>/results/` filter
and sort pods by outcome (unplaced, rejected by the kubelet and by reason, multi-NUMA, predicted ≠ admitted), node,
job and task; the page's counts link to each list; a rejected pod shows the kubelet's message, its request and the
Topology Manager's table, and is not "placed on"; node names link to their page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from numaweb.inventory.models import Cluster, Node
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from scheduler_core.model.cpuset import CPUSet
from tests.pages.helpers import parse
from tests.web.helpers import make_job, make_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    """a-smt: single-numa-node, full-pcpus-only on 2-thread cores (an odd CPU count is an SMTAlignmentError);
    b-be: best-effort over 2 NUMA nodes of 4; c-snn: single-numa-node, 2 NUMA nodes of 4 CPUs."""
    cluster = Cluster.objects.create(name="kubelet")
    make_node(cluster, "a-smt", (1, 2, 2, 2), "single-numa-node", cpu_manager_options={"full-pcpus-only": "true"})
    make_node(cluster, "b-be", (2, 1, 4, 1), "best-effort")
    make_node(cluster, "c-snn", (1, 2, 4, 1), "single-numa-node")
    make_job("odd", cpus="1", policy="")
    make_job("wide", cpus="6", policy="")
    make_job("huge", cpus="64", policy="")
    make_job("pair", cpus="3", replicas=3, policy="")
    return cluster


def run(cluster, profile: str):
    session = services.start_session(cluster, profile, True, None)
    return services.execute_session(session.pk)


def listed(html: str) -> list[int]:
    """Indexes of the rows of the page's pod table."""
    table = html[html.index('<table class="pods-table"'):]
    table = table[:table.index("</table>")]
    return [int(a["data-index"]) for tag, a in parse(table).elements if tag == "tr" and "data-index" in a]


def expected(session, predicate) -> list[int]:
    return [p.index for p in session.placements.order_by("index") if predicate(p)]


def test_counts_link_to_exactly_the_pods_of_each_outcome(client, cluster):
    """Volcano (CPU hints only, no CPU Manager options): the 1- and 3-CPU pods it sends to a-smt are refused
    (SMTAlignmentError), the 6-CPU pod spans b-be's two NUMA nodes, the 64-CPU pod finds no node."""
    session = run(cluster, "volcano")
    url = reverse("pages:session", args=[session.pk])
    html = client.get(url).content.decode()
    rejected = expected(session, lambda p: p.status == "rejected")
    unplaced = expected(session, lambda p: not p.predicted)
    multi = expected(session, lambda p: p.admitted and bin(p.admitted_numa or 0).count("1") > 1)
    assert rejected and unplaced and multi
    counts = html[html.index('id="outcome-counts"'):html.index("</p>", html.index('id="outcome-counts"'))]
    links = {a.get("data-reason") or a["data-outcome-link"]: a["href"]
             for tag, a in parse(counts).elements if tag == "a"}
    assert f"{len(rejected)} rejected by the kubelet" in counts and f"{len(unplaced)} unplaced" in counts
    assert f"{len(rejected)} SMTAlignmentError" in counts and f"{len(multi)} spanning &gt;1 NUMA node" in counts
    for key, want in (("rejected", rejected), ("unplaced", unplaced), ("multi_numa", multi),
                      ("SMTAlignmentError", rejected)):
        page = client.get(links[key].replace("&amp;", "&")).content.decode()
        assert listed(page) == want, key
        assert f"{len(want)} of {session.pods_total} pods" in page
    # the first pod of the filtered list is the one shown: a refused pod, with the kubelet's own words
    page = client.get(url, {"outcome": "rejected"}).content.decode()
    panel = page[page.index('id="pod-detail"'):]
    assert 'data-status="rejected"' in panel[:200] and 'data-refusal="SMTAlignmentError"' in panel
    assert "requested 1 cpus not multiple cpus per core = 2" in panel


def test_the_filters_combine_sort_and_survive_the_pager(client, cluster):
    session = run(cluster, "volcano")
    url = reverse("pages:session", args=[session.pk])
    assert listed(client.get(url, {"outcome": "rejected", "job": "pair"}).content.decode()) == expected(
        session, lambda p: p.status == "rejected" and p.job == "pair")
    assert listed(client.get(url, {"node": "a-smt"}).content.decode()) == expected(
        session, lambda p: p.node_name == "a-smt")
    assert listed(client.get(url, {"task": "t", "job": "default/huge"}).content.decode()) == expected(
        session, lambda p: p.job == "huge")
    by_node = listed(client.get(url, {"sort": "-node"}).content.decode())
    rows = {p.index: p.node_name for p in session.placements.all()}
    assert [rows[i] for i in by_node] == sorted((rows[i] for i in by_node), reverse=True)
    assert sorted(by_node) == list(range(session.pods_total))
    # a wrong value is said, not a 500, and every pod is listed
    bad = client.get(url, {"outcome": "weird"})
    assert bad.status_code == 200 and "outcome: &#x27;weird&#x27; is not one of" in bad.content.decode()
    assert listed(bad.content.decode()) == list(range(session.pods_total))


def test_a_rejected_pod_shows_the_kubelets_message_request_and_table_and_is_not_placed(client, cluster):
    """Unaware sends the 6-CPU pod to a-smt, whose NUMA nodes hold 4 CPUs each: TopologyAffinityError."""
    session = run(cluster, "unaware")
    pod = session.placements.get(pod="wide-t-0")
    assert (pod.status, pod.kubelet_reason) == ("rejected", "TopologyAffinityError")
    html = client.get(reverse("pages:session", args=[session.pk]), {"pod": pod.index}).content.decode()
    panel = html[html.index('id="pod-detail"'):]
    node = Node.objects.get(cluster=cluster, name=pod.node_name)
    assert "Resources cannot be allocated with Topology locality" in panel
    assert re.search(r'data-container="c">c: 6 CPU · 1Gi memory<', panel)
    table = panel[panel.index("data-kubelet-table"):panel.index("</table>", panel.index("data-kubelet-table"))]
    assert "single-numa-node" in table and "✘" in table  # the merged hint the policy refused
    summary = re.search(r"data-summary>(.*?)</p>", panel, re.S).group(1)
    assert "placed on" not in summary and f"the scheduler chose {pod.node_name}, where the kubelet refused it" \
        f" (TopologyAffinityError: Resources cannot be allocated with Topology locality)" in summary
    node_url = reverse("pages:node", args=[node.pk])
    assert f'href="{node_url}">{pod.node_name}</a>' in panel  # the refusal and the chosen node link the node
    # the pod table and the hint rows link every node to its page
    start = html.index('<table class="pods-table"')
    table = html[start:html.index("</table>", start)]
    assert f'<a class="node-link" href="{node_url}">{pod.node_name}</a>' in table
    hints = html[html.index('id="hint-table"'):]
    for other in Node.objects.filter(cluster=cluster):
        assert f'href="{reverse("pages:node", args=[other.pk])}">{other.name}</a>' in hints
    # an admitted pod still says where it was placed
    admitted = session.placements.filter(status="admitted").first()
    ok = client.get(reverse("pages:session", args=[session.pk]), {"pod": admitted.index}).content.decode()
    assert f"placed on {admitted.node_name}" in ok and "data-kubelet-table" not in ok


def test_predicted_differs_from_admitted_lists_the_badged_pods(client, demo):
    session = run(demo, "volcano")
    differs = expected(session, lambda p: bool(p.predicted_cpus) and int(p.predicted_cpus, 16) and p.admitted
                       and CPUSet(int(p.predicted_cpus, 16)) != CPUSet.parse(p.cpus))
    assert differs
    html = client.get(reverse("pages:session", args=[session.pk]), {"outcome": "mismatch"}).content.decode()
    assert listed(html) == differs and f"{len(differs)} predicted ≠ admitted CPUs" in html
    assert html.count("data-differs") >= len(differs)


def test_the_span_chart_labels_every_column_with_its_value(client, cluster):
    session = run(cluster, "volcano")
    html = client.get(reverse("pages:session", args=[session.pk])).content.decode()
    chart = html[html.index('data-metric="numa_span"'):html.index("</figure>", html.index('data-metric="numa_span"'))]
    bars = {a["data-category"]: a["data-value"] for tag, a in parse(chart).elements
            if tag == "rect" and "data-category" in a}
    labels = dict(re.findall(r'<text class="chart-value" data-category="([^"]+)" data-series="0"[^>]*>([^<]*)</text>',
                             chart))
    assert bars and labels == bars and labels["not admitted"] == str(session.pods_total - session.pods_admitted)


def test_the_api_filters_and_sorts_results_the_same_way(api, cluster):
    session = run(cluster, "volcano")
    url = f"/api/sessions/{session.pk}/results/"

    def indexes(**params) -> list[int]:
        r = api.get(url, params)
        assert r.status_code == 200, r.content
        return [p["index"] for p in r.json()["results"]]

    assert indexes(outcome="rejected") == expected(session, lambda p: p.status == "rejected") != []
    assert indexes(outcome="rejected", reason="SMTAlignmentError") == indexes(outcome="rejected")
    assert indexes(outcome="rejected", reason="TopologyAffinityError") == []
    assert indexes(outcome="unplaced") == expected(session, lambda p: not p.predicted)
    assert indexes(outcome="multi_numa") == expected(
        session, lambda p: p.admitted and bin(p.admitted_numa or 0).count("1") > 1)
    assert indexes(outcome="mismatch") == []  # volcano predicted these pods' CPUs right
    assert indexes(node="c-snn") == expected(session, lambda p: p.node_name == "c-snn")
    assert indexes(job="default/pair", task="t") == expected(session, lambda p: p.job == "pair")
    assert indexes(sort="-index") == list(reversed(range(session.pods_total)))
    assert indexes(reason="Insufficient cpu") == expected(session, lambda p: "Insufficient cpu" in (p.message or ""))
    rejected = api.get(url, {"outcome": "rejected"}).json()["results"][0]
    assert rejected["status"] == "rejected" and "not multiple cpus per core" in rejected["reason"]
    for params, field in (({"outcome": "lost"}, "outcome"), ({"sort": "size"}, "sort")):
        r = api.get(url, params)
        assert r.status_code == 400 and field in r.json(), r.content


def test_job_names_with_a_namespace_filter_that_namespace(api, cluster):
    session = run(cluster, "aligned")
    job = Job.objects.get(name="odd")
    assert api.get(f"/api/sessions/{session.pk}/results/", {"job": f"{job.namespace}/odd"}).json()["count"] == 1
    assert api.get(f"/api/sessions/{session.pk}/results/", {"job": "elsewhere/odd"}).json()["count"] == 0
