"""Jobs (submit with inline errors, job page) and sessions (progress fragment that stops polling,
results with the hint table, seed 001's outcome, filters, sorting, per-node rows)."""

import re

import pytest
from django.urls import reverse

from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from scheduler_core.cpuset import CPUSet
from tests.pages.helpers import grid_cells, parse

pytestmark = pytest.mark.django_db


def _field_errors(html: str, field: str) -> str:
    start = html.index(f'data-field="{field}"')
    return html[start:html.index("</div>\n", start)]


def test_bad_quantity_error_sits_next_to_the_cpu_field(client, demo):
    response = client.post(reverse("pages:jobs"), {"name": "bad", "cpu": "1.5x", "replicas": "1"},
                           headers={"HX-Request": "true"})
    assert response.status_code == 200  # htmx swaps 2xx only; a plain POST gets 422
    html = response.content.decode()
    assert "is not a quantity" in _field_errors(html, "cpu")
    assert "field-error" not in _field_errors(html, "name")
    assert not Job.objects.filter(name="bad").exists()


def test_engine_errors_sit_next_to_the_field_they_name(client, demo):
    """The engine says which input an error is about (EngineError.field); no word matching."""
    html = client.post(reverse("pages:jobs"), {"name": "m", "cpu": "1", "memory": "lots"}).content.decode()
    assert "is not a quantity" in _field_errors(html, "memory")
    assert "field-error" not in _field_errors(html, "cpu")
    html = client.post(reverse("pages:jobs"),
                       {"name": "d", "cpu": "1", "devices": "nvidia.com/gpu=1.5"}).content.decode()
    assert "is not a whole number" in _field_errors(html, "devices")
    html = client.post(reverse("pages:jobs"), {"name": "g", "cpu": "1", "replicas": "2",
                                               "min_available": "3"}).content.decode()
    assert "minAvailable (3) is more than its 2 replicas" in _field_errors(html, "min_available")


def test_policy_with_fractional_cpu_and_bad_manifest(client, demo):
    html = client.post(reverse("pages:jobs"), {"name": "frac", "cpu": "500m", "topology_policy": "best-effort",
                                               "guaranteed": "on"}).content.decode()
    assert "whole number of CPUs" in _field_errors(html, "cpu")
    html = client.post(reverse("pages:jobs"), {"manifest": "kind: Job\n  bad: [indent"}).content.decode()
    assert "field-error" in _field_errors(html, "manifest")
    html = client.post(reverse("pages:jobs"), {"name": "vj-test", "cpu": "1"}).content.decode()
    assert "already exists" in _field_errors(html, "name")


def test_submit_job_then_its_page(client, demo):
    response = client.post(reverse("pages:jobs"), {"name": "fresh", "namespace": "default", "task": "w",
                                                   "replicas": "2", "cpu": "2", "memory": "1Gi",
                                                   "topology_policy": "best-effort", "guaranteed": "on"},
                           headers={"HX-Request": "true"})
    job = Job.objects.get(name="fresh")
    assert response.status_code == 204 and response["HX-Redirect"] == reverse("pages:job", args=[job.pk])
    html = client.get(reverse("pages:job", args=[job.pk])).content.decode()
    assert 'data-pod="fresh-w-0"' in html and 'data-pod="fresh-w-1"' in html and "not scheduled yet" in html


def _run(demo, jobs, profile="volcano", dry_run=True):
    session = services.start_session(demo, profile, dry_run, jobs)
    return session, services.execute_session(session.pk)


def test_progress_fragment_polls_until_done_then_stops(client, demo):
    session = services.start_session(demo, "volcano", True, [Job.objects.get(name="vj-test")])
    url = reverse("pages:session-progress", args=[session.pk])
    pending = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every' in pending and "waiting for a worker" in pending
    SchedulingSession.objects.filter(pk=session.pk).update(status="running", progress_done=0, progress_total=4)
    running = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert '<progress id="progress-' in running and 'max="4"' in running and 'hx-trigger="every' in running
    SchedulingSession.objects.filter(pk=session.pk).update(status="pending", progress_total=0)
    services.execute_session(session.pk)
    done = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in done.split(">", 1)[0] and 'data-status="done"' in done
    assert 'id="hint-table"' in done


def test_seed_001_node_3_chosen_and_node_2_explains_two_numa_hint(client, demo):
    _s, session = _run(demo, [Job.objects.get(name="vj-test")])
    html = client.get(reverse("pages:session", args=[session.pk])).content.decode()
    assert 'data-chosen="node-3"' in html
    start = html.index('data-node="node-2" data-outcome')
    row = html[start:html.index("</tr>", start)]
    assert "{11: T}" in row and "needs 2 NUMA nodes (0+1)" in row
    chosen = html[html.index('data-node="node-3" data-outcome'):]
    assert "{01: T}" in chosen[:chosen.index("</tr>")]
    # the chosen node's grid highlights the 20 CPUs the kubelet gave (dry run: not held)
    placement = session.placements.get()
    lit = [c for c in grid_cells(html, "pod-grid") if c.get("data-highlight") == "1"]
    assert len(lit) == 20 and placement.cpus == "0-19"
    assert "nodes are unavailable" in html  # the upstream-style line for the nodes that failed


def test_an_order_dependent_prediction_is_marked(client, demo):
    """Volcano's selection can depend on Go's map order; the pod's prediction says so when it does."""
    _s, session = _run(demo, [Job.objects.get(name="vj-test")])
    placement = session.placements.get()
    url = reverse("pages:session", args=[session.pk])
    assert placement.predicted_order_dependent is False
    assert "order-dependent upstream" not in client.get(url).content.decode()
    placement.predicted_order_dependent = True
    placement.save(update_fields=["predicted_order_dependent"])
    assert "order-dependent upstream" in client.get(url).content.decode()


def test_hint_table_filters_sorts_and_expands(client, demo):
    _s, session = _run(demo, [Job.objects.get(name="vj-test")], profile="aligned")
    url = reverse("pages:session-hints", args=[session.pk, 0])
    failed = parse(client.get(url, {"show": "failed"}, headers={"HX-Request": "true"}).content)
    outcomes = {a["data-outcome"] for tag, a in failed.elements if tag == "tr" and "data-outcome" in a}
    assert outcomes and outcomes <= {"filtered", "unschedulable"}
    html = client.get(url, {"reason": "Insufficient cpu"}).content.decode()
    assert 'data-node="srv-plain-1"' in html and 'data-node="node-3"' not in html
    scores = [tag_a for tag_a in parse(client.get(url, {"sort": "score"}).content).elements
              if tag_a[0] == "tr" and "data-outcome" in tag_a[1]]
    assert scores[0][1]["data-outcome"] == "passed"
    assert "TopologyAffinityError" in client.get(url).content.decode()  # node-1 cannot hold 20 CPUs on one NUMA
    _s, volcano = _run(demo, [Job.objects.get(name="vj-test")], profile="volcano")  # identical nodes share a row
    url = reverse("pages:session-hints", args=[volcano.pk, 0])
    grouped = client.get(url).content.decode()
    expanded = client.get(url, {"expand": "1"}).content.decode()
    rows = lambda h: [a for t, a in parse(h).elements if t == "tr" and "data-outcome" in a]  # noqa: E731
    assert sum(int(a["data-count"]) for a in rows(grouped)) == session.nodes_total
    assert len(rows(expanded)) == session.nodes_total and len(rows(grouped)) < session.nodes_total
    # captions count rows of the mode shown ("46 of 5 rows" was the per-node count over the classes)
    caption = lambda h: re.search(r'<caption id="hint-caption">(.*?)</caption>', h).group(1)  # noqa: E731
    assert caption(expanded) == f"Hint table: {session.nodes_total} rows (one per node)"
    assert caption(grouped) == f"Hint table: {len(rows(grouped))} rows (one per node class)"
    failed = client.get(url, {"expand": "1", "show": "failed"}).content.decode()
    assert caption(failed) == f"Hint table: {len(rows(failed))} of {session.nodes_total} rows (one per node)"
    for html in (grouped, expanded):  # the notation's key beside every hint table
        assert 'class="hint-key"' in html and reverse("pages:help") + "#hint-notation" in html


def test_every_prediction_that_differs_from_the_admission_carries_a_badge(client, demo):
    _s, session = _run(demo, list(Job.objects.all()), profile="volcano")
    differs = set()
    for p in session.placements.all():
        predicted = CPUSet(int(p.predicted_cpus, 16)) if p.predicted_cpus else None
        if predicted and p.admitted and predicted != CPUSet.parse(p.cpus):
            differs.add(p.index)
    html = client.get(reverse("pages:session", args=[session.pk])).content.decode()
    badged = set()
    for row in re.findall(r'<tr data-pod="[^"]*" data-index="(\d+)".*?</tr>', html, re.S):
        badged.add(int(row))
    marked = {int(i) for i in re.findall(r'data-index="(\d+)"[^>]*>(?:(?!</tr>).)*data-differs', html, re.S)}
    assert badged and differs and marked == differs
    for index in sorted(differs)[:1] or [session.placements.first().index]:
        pod = client.get(reverse("pages:session", args=[session.pk]), {"pod": index}).content.decode()
        assert ("data-differs" in pod) == (index in differs)
        if index in differs:
            assert "Volcano predicts with its own copy" in pod and reverse("pages:help") + "#volcano-prediction" in pod
    help_page = client.get(reverse("pages:help")).content.decode()
    assert 'id="volcano-prediction"' in help_page and 'id="hint-notation"' in help_page


def test_start_session_over_htmx_returns_the_polling_panel(client, demo):
    cluster = demo
    response = client.post(reverse("pages:session-start"), {"cluster": cluster.pk, "profile": "volcano",
                                                            "dry_run": "on"}, headers={"HX-Request": "true"})
    session = SchedulingSession.objects.latest("id")
    assert response.status_code == 200
    assert response["HX-Push-Url"] == reverse("pages:session", args=[session.pk])
    assert 'hx-trigger="every' in response.content.decode()
    plain = client.post(reverse("pages:session-start"), {"cluster": cluster.pk, "profile": "aligned"})
    assert plain.status_code == 302


def test_hint_table_and_session_page_take_bad_query_values_as_defaults(client, demo):
    _s, session = _run(demo, [Job.objects.get(name="vj-test")], profile="aligned")
    url = reverse("pages:session-hints", args=[session.pk, 0])
    plain = client.get(url)
    bad = client.get(url, {"show": "nope", "sort": "'; drop", "size": "huge", "page": "-4", "expand": "maybe"})
    assert plain.status_code == bad.status_code == 200
    rows = lambda r: [a["data-node"] for t, a in parse(r.content).elements if t == "tr" and "data-outcome" in a]  # noqa: E731
    assert rows(bad) == rows(plain) and rows(plain)
    small = client.get(url, {"size": "10", "sort": "name"})
    assert rows(small) == sorted(rows(small))
    page = client.get(reverse("pages:session", args=[session.pk]), {"pod": "-1", "pods_page": "x"})
    assert page.status_code == 200 and 'data-chosen="node-3"' in page.content.decode()
