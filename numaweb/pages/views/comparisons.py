"""Comparison pages: start one (the form on the jobs page posts here), watch its variants run, then
read the answer as a metrics table, bar charts per metric, the single-NUMA block histogram and a
heat strip of NUMA use per variant."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.forms import BaseFormSet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from numaweb.access.decorators import requires
from numaweb.comparisons import charts, gaps, services
from numaweb.comparisons.export import BLOCK_BIN_LABELS, Metric, metric_rows, values
from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.inventory.models import Cluster
from numaweb.worker.runs import BrokerUnavailable

from ..comparison_forms import ComparisonForm, chosen_variants, variant_formset
from .common import HtmxHttpRequest

POLL = "every 1s"


#: the unbound variants' rows as HTML, by language: the same on every jobs page, and 8 rows of selects and
#: check boxes rendered through Django's widget templates were half of that page's CPU time
_VARIANT_ROWS: dict[str, SafeString] = {}


def form_context(form: ComparisonForm | None = None, formset: BaseFormSet | None = None, error: str = "",
                 cluster: Cluster | None = None) -> dict[str, object]:
    """What the comparison form needs (the jobs page includes it, in its chosen `cluster`). An unbound formset's
    rows are rendered once per process (`variant_rows`); a bound one's (with its values and errors) each time."""
    context: dict[str, object] = {
        "compare_form": form or ComparisonForm(initial={"cluster": cluster, "cpu": "4", "memory": "8Gi"}),
        "variant_forms": formset or variant_formset(), "compare_error": error}
    if formset is None:
        language = translation.get_language() or ""
        rows = _VARIANT_ROWS.get(language)
        if rows is None:
            rows = _VARIANT_ROWS[language] = mark_safe(render_to_string(
                "comparisons/_variant_rows.html", {"variant_forms": context["variant_forms"]}))
        context["variant_rows"] = rows
    return context


@requires("access.compare")
@require_POST
def start(request: HtmxHttpRequest) -> HttpResponse:
    form = ComparisonForm(request.POST)
    formset = variant_formset(request.POST)
    variants = chosen_variants(form, formset)
    if variants is None:
        return render(request, "comparisons/_form.html", form_context(form, formset),
                      status=200 if request.htmx else 422)
    data = form.cleaned_data
    try:
        comparison = services.start_comparison(data["cluster"], variants, list(data["jobs"]) or None, data["shape"])
    except BrokerUnavailable as exc:
        return render(request, "comparisons/_form.html", form_context(form, formset, str(exc)),
                      status=200 if request.htmx else 503)
    url = reverse("comparisons:detail", args=[comparison.pk])
    return HttpResponseClientRedirect(url, status=204) if request.htmx else redirect(url)


def _metric_charts(rows: list[Metric], variants: list, shown: dict[int, dict[str, Any]]) -> list[dict]:
    out = []
    for key, label, better in rows:
        numbers = [shown[v.index].get(key) for v in variants]
        if all(value is None for value in numbers):
            continue
        hint = {True: "more is better", False: "fewer is better", None: ""}[better]
        out.append({"key": key, "label": label, "hint": hint,
                    "svg": charts.bar_chart(label, [(_bar_label(v, key), shown[v.index].get(key), v.index)
                                                    for v in variants])})
    return out


def _bar_label(variant: ComparisonVariant, key: str) -> str:
    """A bar's name; a headroom count cut short by a bound is marked, so its shorter bar is not read as less room."""
    cut = key.startswith("headroom") and (variant.headroom or {}).get("at_least")
    return f"{variant.index + 1}. {variant.label}{' (at least)' if cut else ''}"


def _cell(variant: ComparisonVariant, shown: dict[str, Any], key: str) -> object:
    """A metric as the table shows it: headroom cut short by a bound (NUMAWEB_HEADROOM_MAX_PODS or
    NUMAWEB_HEADROOM_SECONDS) reads "at least N", naming the bound."""
    value = shown.get(key)
    room = variant.headroom or {}
    if key == "headroom_admitted" and value is not None and room.get("at_least"):
        return f"at least {value} ({room.get('stopped') or 'bounded'})"
    return value


def _context(comparison: Comparison) -> dict:
    variants = list(comparison.variants.all())
    ctx: dict = {"comparison": comparison, "variants": variants, "poll": POLL, "status": comparison.status}
    done = [v for v in variants if v.status == Comparison.DONE]
    if not done:
        return ctx
    rows = metric_rows(variants)
    shown = {v.index: values(v) for v in variants}
    ctx["rows"] = [(key, label, better, [_cell(v, shown[v.index], key) for v in variants])
                   for key, label, better in rows]
    ctx["gaps"] = gaps.notes(comparison, variants)
    ctx["charts"] = _metric_charts(rows, done, shown)
    bins = list(BLOCK_BIN_LABELS)
    ctx["histogram"] = charts.column_chart(
        "free single-NUMA blocks by size (free CPUs on one NUMA node)", bins,
        [(f"{v.index + 1}. {v.label}", [v.metrics["block_histogram"][b] for b in bins], v.index) for v in done],
        width=900, x_label="free CPUs on one NUMA node")
    ctx["legend"] = charts.legend([(f"{v.index + 1}. {v.label}", v.index) for v in done])
    ctx["heat_legend"] = charts.heat_legend()
    ctx["strips"] = done  # each drawn on demand (`strip`): the per-node tables are read there alone
    return ctx


@requires("comparisons.view_comparison")
@require_GET
def detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    comparison = get_object_or_404(Comparison.objects.summaries(), pk=pk)
    ctx = {**_context(comparison), "jobs_count": comparison.jobs.count()}
    if request.htmx and request.htmx.target == "comparison-body":
        return render(request, "comparisons/_body.html", ctx)
    return render(request, "comparisons/detail.html", ctx)


@requires("comparisons.view_comparison")
@require_GET
def strip(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """A finished variant's heat strip of NUMA use: the comparison page asks for each over htmx, so its own answer
    never decodes the per-node tables (megabytes at 5,000 nodes)."""
    variant = get_object_or_404(ComparisonVariant.objects.only("label", "nodes"), comparison_id=pk, index=index,
                                status=Comparison.DONE)
    return HttpResponse(charts.heat_strip(f"NUMA use after placement: {variant.label}", variant.nodes))


@requires("comparisons.view_comparison")
@require_GET
def comparison_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(Comparison.objects.summaries().order_by("-id"), 50).get_page(
        request.GET.get("page"))
    return render(request, "comparisons/list.html", {"page": page})
