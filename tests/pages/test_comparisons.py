"""Comparison pages (form on the jobs page, inline errors, the page with its SVG charts) and the
dashboard's headroom box answering on the node cards."""

from __future__ import annotations

import pytest
from django.urls import reverse

from numaweb.comparisons import services
from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Node
from numaweb.scheduling import results
from scheduler_core.scheduler.compare import BLOCK_BINS, Shape
from scheduler_core.scheduler.profiles import PROFILES
from tests.pages.helpers import parse

pytestmark = pytest.mark.django_db


def form_data(cluster, rows=(("volcano", {}), ("aligned", {}), ("unaware", {})), **extra) -> dict:
    data = {"cmp-cluster": cluster.pk, "cmp-cpu": "4", "cmp-memory": "8Gi", "v-TOTAL_FORMS": "4",
            "v-INITIAL_FORMS": "0", "v-MIN_NUM_FORMS": "4", "v-MAX_NUM_FORMS": "4"}
    for i in range(4):
        profile, fields = rows[i] if i < len(rows) else ("", {})
        data[f"v-{i}-profile"] = profile
        data[f"v-{i}-weight"] = "1"
        data.update({f"v-{i}-{k}": v for k, v in fields.items()})
    data.update({f"cmp-{k}": v for k, v in extra.items()})
    return data


def run_all(comparison: Comparison) -> None:
    """What the workers do (tests/worker runs them on real ones)."""
    for variant in comparison.variants.all():
        services.execute_variant(variant.pk)


def marks(html: str, cls: str) -> list[dict]:
    return [a for tag, a in parse(html).elements if tag == "rect" and cls in a.get("class", "").split()]


def test_jobs_page_has_the_comparison_form(client, demo):
    html = client.get(reverse("pages:jobs")).content.decode()
    rows = len(PROFILES) + 1  # every engine profile chosen, and one row to spare
    assert 'id="compare-form"' in html and html.count('data-variant-row=') == rows
    profiles = []
    for i in range(rows):
        select = html[html.index(f'name="v-{i}-profile"'):]
        select = select[:select.index("</select>")]
        profiles += [a["value"] for tag, a in parse(select).elements if tag == "option" and "selected" in a]
    assert profiles == [*PROFILES, ""]
    assert 'name="v-0-strategy"' in html and '<option value="LeastNUMANodes">' in html
    # the advisor's profile choice beside it: the pending jobs' last session's, or any engine profile
    select = html[html.index('id="id_defrag_profile"'):]
    select = select[:select.index("</select>")]
    assert [a["value"] for tag, a in parse(select).elements if tag == "option"] == ["", *PROFILES]


def test_jobs_page_variant_rows_are_rendered_once_as_a_fresh_formset_renders_them(client, demo):
    """Issue 31: the unbound variants' rows are kept as HTML per process (half of the jobs page's CPU time);
    what is kept is what rendering a fresh formset gives, and a bound formset (errors) is rendered anew."""
    from django.template.loader import render_to_string

    from numaweb.pages.comparison_forms import variant_formset
    from numaweb.pages.views import comparisons

    comparisons._VARIANT_ROWS.clear()
    fresh = render_to_string("comparisons/_variant_rows.html", {"variant_forms": variant_formset()})
    assert fresh.count("<tr data-variant-row=") >= 4
    for _ in range(2):
        html = client.get(reverse("pages:jobs")).content.decode()
        assert fresh in html
    assert list(comparisons._VARIANT_ROWS.values()) == [fresh]
    bound = comparisons.form_context(formset=variant_formset({"v-TOTAL_FORMS": "1", "v-INITIAL_FORMS": "0"}))
    assert "variant_rows" not in bound


def test_submit_then_the_page_shows_charts_with_one_bar_per_variant(client, demo, monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda ids: None)  # no worker here: run them below
    rows = (("volcano", {}), ("aligned", {}), ("unaware", {}),
            ("aligned", {"topology_manager_policy": "single-numa-node", "distance_tie_break": "on"}))
    response = client.post(reverse("comparisons:start"), form_data(demo, rows))
    comparison = Comparison.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("comparisons:detail", args=[comparison.pk])
    labels = [v.label for v in comparison.variants.all()]
    assert labels == ["volcano", "aligned", "unaware", "aligned · single-numa-node · closest"]
    assert comparison.shape == {"cpu": "4", "memory": "8Gi", "devices": {}, "policy": None}
    url = reverse("comparisons:detail", args=[comparison.pk])
    pending = client.get(url).content.decode()
    assert 'data-status="pending"' in pending and "hx-trigger" in pending and "<svg" not in pending
    run_all(comparison)
    html = client.get(url).content.decode()
    assert 'data-status="done"' in html and 'hx-trigger="every' not in html  # polling ends
    charts = html.count('data-chart="bars"')
    assert charts >= 9
    bars = marks(html, "chart-bar")
    by_chart = len([b for b in bars if "data-category" not in b])
    assert by_chart == 4 * charts  # one bar per variant in every metric chart
    variants = list(comparison.variants.all())
    tae = [b for b in _chart(html, "topology_affinity_errors") if "data-category" not in b]
    assert [int(b["data-value"]) for b in tae] == [v.metrics["topology_affinity_errors"] for v in variants]
    columns = [b for b in bars if "data-category" in b]
    assert len(columns) == 4 * len(BLOCK_BINS)
    for b in columns:
        v = variants[int(b["data-series"])]
        assert int(b["data-value"]) == v.metrics["block_histogram"][b["data-category"]]
    # the strips are drawn on demand, each from its variant's per-node table (the legend's swatches stay)
    assert not [c for c in marks(html, "heat") if "data-node" in c]
    strips = [reverse("comparisons:strip", args=[comparison.pk, v.index]) for v in variants]
    assert all(f'hx-get="{url}"' in html for url in strips)
    cells = [c for url in strips for c in marks(client.get(url).content.decode(), "heat")]
    numa_total = sum(n.num_numa_nodes for n in Node.objects.filter(cluster=demo))
    assert len([c for c in cells if "data-node" in c]) == 4 * numa_total
    srv = [c for c in cells if c.get("data-node") == "srv-gpu-1" and c.get("data-numa") == "0"]
    assert {c["data-capacity"] for c in srv} == {"14"}  # 16 threads on NUMA 0, reserved 0 and its sibling 32
    assert "style=" not in html.split('<section id="comparison-body"')[1]
    assert "<script" not in html.split('<section id="comparison-body"')[1]


def _chart(html: str, metric: str) -> list[dict]:
    start = html.index(f'data-metric="{metric}"')
    end = html.index("</figure>", start)
    return marks(html[start:end], "chart-bar")


@pytest.mark.parametrize("extra, rows, text", [
    ({"cpu": "lots"}, None, "is not a quantity"),
    ({}, (("", {}),), "choose a profile for at least one variant"),
    ({}, (("volcano", {"distance_tie_break": "on"}),), "only the aligned profile"),
    ({}, (("aligned", {"weight": "101"}),), "less than or equal to 100"),
])
def test_bad_comparisons_come_back_with_inline_errors(client, demo, extra, rows, text):
    data = form_data(demo, rows or (("volcano", {}),), **extra)
    response = client.post(reverse("comparisons:start"), data, headers={"HX-Request": "true"})
    assert response.status_code == 200  # htmx swaps 2xx; a plain POST gets 422
    html = response.content.decode()
    assert 'id="compare-form"' in html and text in html and "field-error" in html
    assert client.post(reverse("comparisons:start"), data).status_code == 422
    assert not Comparison.objects.exists()


def test_changed_cluster_is_shown(client, demo, monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda ids: None)
    client.post(reverse("comparisons:start"), form_data(demo))
    comparison = Comparison.objects.get()
    node = Node.objects.get(cluster=demo, name="node-1")
    inventory.add_allocation(node, pod="default/z", container="c", cpus="3")
    run_all(comparison)
    html = client.get(reverse("comparisons:detail", args=[comparison.pk])).content.decode()
    assert 'data-changed="1"' in html and "node-1" in html
    assert ComparisonVariant.objects.filter(changed_nodes=["node-1"]).count() == 3
    assert "cluster changed meanwhile" in client.get(reverse("comparisons:list")).content.decode()


def test_dashboard_headroom_box_answers_on_every_card(client, demo):
    html = client.get(reverse("home")).content.decode()
    assert 'id="headroom-form"' in html and "data-headroom=" not in html
    query = {"hr-cpu": "4", "hr-memory": "8Gi", "hr-devices": "nvidia.com/gpu=1", "hr-policy": "single-numa-node",
             "hr-profile": "aligned"}
    html = client.get(reverse("home"), query, headers={"HX-Request": "true", "HX-Target": "node-list"}).content.decode()
    cards = {a["data-node"]: a for tag, a in parse(html).elements if tag == "li" and "data-node" in a}
    answers = [a for tag, a in parse(html).elements if "data-headroom" in a]
    assert len(answers) == len(cards) == Node.objects.filter(cluster=demo).count()
    expected = services.cluster_headroom(demo, Shape.parse("4", "8Gi", "nvidia.com/gpu=1", "single-numa-node"))
    assert sum(int(a["data-headroom"]) for a in answers) == expected["total"] > 0
    assert f'data-headroom-total="demo">{expected["total"]}<' in html
    for chunk in html.split('<li class="card"')[1:]:
        name = chunk.split('data-node="')[1].split('"')[0]
        count = next(n["count"] for n in expected["nodes"] if n["node"] == name)
        assert f'data-headroom="{count}"' in chunk


def test_dashboard_headroom_bad_shape_is_an_inline_error(client, demo):
    html = client.get(reverse("home"), {"hr-cpu": "four", "hr-profile": "aligned"}).content.decode()
    assert 'data-headroom-error="cpu"' in html and "is not a quantity" in html
    assert "data-headroom=" not in html


def test_heat_strip_averages_neighbours_above_the_cell_cap():
    from numaweb.comparisons import charts

    nodes = [{"node": f"n{i:04d}", "numa": [[i % 9, 8], [0, 8]]} for i in range(1500)]  # 3,000 NUMA nodes
    svg = str(charts.heat_strip("use", nodes))
    cells = marks(svg, "heat")
    per = -(-3000 // charts.MAX_CELLS)  # NUMA nodes a cell
    assert per > 1 and len(cells) == -(-3000 // per)
    assert sum(int(c["data-capacity"]) for c in cells) == 3000 * 8
    assert sum(int(c["data-used"]) for c in cells) == sum(8 - (i % 9) + 8 for i in range(1500))
    assert f"n0000 N0 … n{(per - 1) // 2:04d} N{(per - 1) % 2}" in svg and "style=" not in svg
    small = marks(str(charts.heat_strip("use", nodes[:10])), "heat")
    assert [(c["data-node"], c["data-numa"]) for c in small[:3]] == [("n0000", "0"), ("n0000", "1"), ("n0001", "0")]


@pytest.mark.parametrize("series, values, upright", [
    (6, [7246, 4269, 1154, 415, 50, 2935, 317, 0], True),  # six variants' thousands in 8 bins: wider than a column
    (2, [12, 7, 3, 0, 1, 5, 9, 2], False),  # short numbers in wide columns read level
])
def test_column_values_wider_than_their_column_stand_upright(series, values, upright):
    from numaweb.comparisons import charts

    svg = str(charts.column_chart("blocks", list("abcdefgh"), [(f"v{i}", values, i) for i in range(series)],
                                  width=900))
    texts = [a for tag, a in parse(svg).elements if tag == "text" and "chart-value" in a.get("class", "")]
    assert len(texts) == 8 * series
    assert all(("transform" in a) == upright for a in texts)
    if upright:  # turned about its own anchor, and the plot is lowered so the tallest column's value fits above it
        a = texts[0]
        assert a["transform"] == f"rotate(-90 {a['x']} {a['y']})" and a["text-anchor"] == "start"
        tallest = min(float(r["y"]) for r in marks(svg, "chart-bar"))
        assert tallest - 3 >= len("7,246") * charts.VALUE_CHAR_PX


def test_session_page_charts_numa_span_per_pod(client, demo):
    """One column per span bin; the values are the engine's admitted NUMA masks of the session's pods."""
    from numaweb.jobs.models import Job
    from numaweb.scheduling import services as scheduling
    from scheduler_core.scheduler.compare import SPAN_BINS, span_histogram

    session = scheduling.start_session(demo, "unaware", dry_run=True, jobs=list(Job.objects.all()))
    session = scheduling.execute_session(session.pk)
    html = client.get(reverse("pages:session", args=[session.pk])).content.decode()
    start = html.index('data-metric="numa_span"')
    columns = marks(html[start:html.index("</figure>", start)], "chart-bar")
    assert [c["data-category"] for c in columns] == list(SPAN_BINS)
    values = {c["data-category"]: int(c["data-value"]) for c in columns}
    assert sum(values.values()) == session.pods_total == 11
    assert values["not admitted"] == session.pods_total - session.pods_admitted == 1  # unaware: one refused
    records = results.pod_records(session, list(session.placements.order_by("index")))
    expected = span_histogram(sum(1 << n for n in r["admitted_numa"] or ()) if r["status"] == "admitted" else None
                              for r in records)
    assert values == expected and values["1"] > 0


def test_headroom_cut_short_by_a_bound_reads_at_least_naming_it(client, demo, monkeypatch, settings):
    monkeypatch.setattr(services, "enqueue", lambda ids: None)  # no worker here: run them below
    response = client.post(reverse("comparisons:start"), form_data(demo, (("aligned", {}),), cpu="1", memory=""))
    assert response.status_code == 302
    comparison = Comparison.objects.get()
    settings.NUMAWEB_HEADROOM_MAX_PODS = 3
    run_all(comparison)
    [variant] = comparison.variants.all()
    assert variant.headroom["at_least"] is True and variant.headroom["stopped"] == "limit of 3 pods tried"
    html = client.get(reverse("comparisons:detail", args=[comparison.pk])).content.decode()
    row = html[html.index("headroom (pods of the shape)"):]
    row = row[:row.index("</tr>")]
    assert f"<td>at least {variant.metrics['headroom']} (limit of 3 pods tried)</td>" in row
    # the chart marks the shorter bar, and a note says why it is short and which setting raises the bound
    chart = html[html.index('data-metric="headroom_admitted"'):]
    chart = chart[:chart.index("</figure>")]
    assert "1. aligned (at least)" in chart
    notes = html[html.index('class="gap-notes"'):html.index("</ul>", html.index('class="gap-notes"'))]
    assert (f"1. aligned: headroom counting stopped at the limit of 3 pods tried: at least "
            f"{variant.metrics['headroom_admitted']} pods, not comparable with a full count "
            "(NUMAWEB_HEADROOM_MAX_PODS raises the bound)") in notes

    settings.NUMAWEB_HEADROOM_MAX_PODS = 100000  # unbounded: the plain count
    ComparisonVariant.objects.filter(pk=variant.pk).update(status="pending")
    run_all(comparison)
    variant.refresh_from_db()
    assert variant.headroom["at_least"] is False
    html = client.get(reverse("comparisons:detail", args=[comparison.pk])).content.decode()
    row = html[html.index("headroom (pods of the shape)"):]
    assert f"<td>{variant.metrics['headroom']}</td>" in row[:row.index("</tr>")] and "at least" not in row[:200]
    assert "(at least)" not in html and "counting stopped" not in html


def test_every_kubelet_verdict_is_counted_and_large_gaps_are_explained(client, monkeypatch):
    """One single-numa-node node with full-pcpus-only on 2-thread cores, three best-effort nodes; two 1-CPU jobs
    with the single-numa-node task policy. Volcano sends both to the one node of their policy, where the kubelet
    refuses them (SMTAlignmentError); aligned never places what the kubelet refuses. The table, the charts and the
    CSV count the refusals by reason, "pods placed" ranks nothing, headroom is net of refusals, and the page says
    why Volcano's headroom is a fifth of aligned's (its task-policy = node-policy filter: 1 node of 4)."""
    import csv
    import io

    from numaweb.inventory.models import Cluster
    from tests.web.helpers import make_job, make_node

    cluster = Cluster.objects.create(name="smt")
    make_node(cluster, "snn", (1, 2, 2, 2), "single-numa-node", cpu_manager_options={"full-pcpus-only": "true"})
    for i in range(3):
        make_node(cluster, f"be-{i}", (1, 2, 4, 1), "best-effort")
    make_job("one-a", cpus="1", policy="single-numa-node")
    make_job("one-b", cpus="1", policy="single-numa-node")
    monkeypatch.setattr(services, "enqueue", lambda ids: None)
    client.post(reverse("comparisons:start"), form_data(cluster, cpu="2", memory="1Gi", policy="single-numa-node"))
    comparison = Comparison.objects.get()
    run_all(comparison)
    volcano, aligned, unaware = comparison.variants.all()
    assert volcano.metrics["admission_errors_by_reason"] == {"SMTAlignmentError": 2}
    assert (volcano.metrics["pods_placed"], volcano.metrics["pods_admitted"]) == (2, 0)
    assert (aligned.metrics["pods_admitted"], aligned.metrics["pods_rejected"]) == (2, 0)
    # snn takes 3 pods of 2 CPUs, each best-effort node 4 (aligned's two 1-CPU pods leave them 11)
    assert (aligned.metrics["headroom_admitted"], volcano.metrics["headroom_admitted"]) == (15, 3)

    html = client.get(reverse("comparisons:detail", args=[comparison.pk])).content.decode()

    def row(key: str) -> list[str]:
        start = html.index(f'data-metric-row="{key}"')
        return [a.split("<")[0] for a in html[start:html.index("</tr>", start)].split("<td>")[1:]]

    assert row("pods_rejected") == ["2", "0", str(unaware.metrics["pods_rejected"])]
    assert row("rejected_SMTAlignmentError")[:2] == ["2", "0"]
    assert row("topology_affinity_errors")[:2] == ["0", "0"]
    assert row("rejected_UnexpectedAdmissionError")[:2] == ["0", "0"]
    assert row("pods_admitted")[:2] == ["0", "2"]
    assert row("headroom_admitted")[:2] == ["3", "15"]
    # the charts: admitted ranks, placed carries no "more is better"; one chart per kubelet reason
    assert [int(b["data-value"]) for b in _chart(html, "rejected_SMTAlignmentError")][:2] == [2, 0]
    placed = html[html.index('data-metric="pods_placed"'):]
    assert "more is better" not in placed[:placed.index("</figcaption>")]
    admitted = html[html.index('data-metric="pods_admitted"'):]
    assert "more is better" in admitted[:admitted.index("</figcaption>")]
    # why the gaps: the refusals by reason, and Volcano's filter with the count of nodes of the shape's policy
    notes = html[html.index('class="gap-notes"'):html.index("</ul>", html.index('class="gap-notes"'))]
    assert "1. volcano: the kubelet refuses 2 of the 2 pods it placed (2 SMTAlignmentError" in notes
    assert "1. volcano: headroom 3 against 15 for 2. aligned" in notes
    assert "that same Topology Manager policy, 1 of 4 nodes" in notes
    assert 'data-gap-variant="1"' not in notes  # aligned: nothing to explain

    rows = list(csv.DictReader(io.StringIO(client.get(
        reverse("api:comparison-export", args=[comparison.pk]) + "?format=csv").content.decode())))
    assert [r["rejected_SMTAlignmentError"] for r in rows][:2] == ["2", "0"]
    assert [(r["pods_admitted"], r["pods_rejected"], r["headroom_admitted"], r["headroom_rejected"])
            for r in rows][:2] == [("0", "2", "3", "0"), ("2", "0", "15", "0")]
    data = client.get(reverse("api:comparison-export", args=[comparison.pk]) + "?format=json").json()
    assert [g["metric"] for g in data["gaps"] if g["variant"] == 0][:2] == ["pods_rejected", "headroom_admitted"]


def test_the_nrt_strategy_is_a_variant_option(client, demo, monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda ids: None)
    rows = (("nrt", {}), ("nrt", {"strategy": "LeastNUMANodes"}))
    client.post(reverse("comparisons:start"), form_data(demo, rows))
    variants = list(Comparison.objects.get().variants.all())
    assert [(v.label, v.settings["strategy"]) for v in variants] == [("nrt", None),
                                                                       ("nrt · LeastNUMANodes", "LeastNUMANodes")]
    # a strategy on another profile is refused on its field
    response = client.post(reverse("comparisons:start"), form_data(demo, (("aligned", {"strategy": "MostAllocated"}),)))
    assert response.status_code == 422
    assert "only the nrt and koordinator profiles have a scoring strategy" in response.content.decode()
