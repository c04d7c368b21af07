"""Sessions: start one, watch its progress, then read its pods (filtered and sorted by outcome, kubelet reason,
node, job and task, with counts that link to each list), each pod's verdicts per node (the hint table), what the
kubelet said of it, and the NUMA span chart."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url, reswap, retarget

from numaweb.access.decorators import requires
from numaweb.comparisons import charts
from numaweb.inventory.models import Node
from numaweb.jobs.models import Task
from numaweb.scheduling import outcomes, results
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import Placement, PodStatus, SchedulingSession
from numaweb.worker.runs import BrokerUnavailable
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.quantity import format_bytes

from .. import grid, session_rows, tables
from ..forms import HintTableForm, SessionForm
from .common import PODS_PER_PAGE, HtmxHttpRequest
from .jobs import jobs_context

POLL = "every 500ms"


@requires("scheduling.add_schedulingsession")
@require_POST
def session_start(request: HtmxHttpRequest) -> HttpResponse:
    form = SessionForm(request.POST)
    if not form.is_valid():
        if request.htmx:
            return _form_back(request, form, "")
        return render(request, "pages/jobs.html", jobs_context(request, session_form=form), status=422)
    data = form.cleaned_data
    jobs = list(data["jobs"]) or None
    error = ""
    session: SchedulingSession | None
    try:
        session = scheduling.start_session(data["cluster"], data["profile"], data["dry_run"], jobs)
    except BrokerUnavailable as exc:
        error = str(exc)
        session = SchedulingSession.objects.get(pk=exc.session_id) if exc.session_id else None
    if session is None:
        if request.htmx:
            return _form_back(request, form, error)
        return render(request, "pages/_session_form.html", {"session_form": form, "error": error}, status=503)
    url = reverse("pages:session", args=[session.pk])
    if not request.htmx:
        return redirect(url)
    session.refresh_from_db()
    return push_url(render(request, "pages/_session.html", _session_context(request, session, error)), url)


def _form_back(request: HtmxHttpRequest, form: SessionForm, error: str) -> HttpResponse:
    """The session form again with its errors, swapped in place of itself (not into the panel)."""
    response = render(request, "pages/_session_form.html", {"session_form": form, "error": error})
    return reswap(retarget(response, "#session-form"), "outerHTML")


def _session_context(request: HtmxHttpRequest, session: SchedulingSession, error: str = "") -> dict:
    ctx: dict = {"session": session, "error": error or session.error, "poll": POLL,
                 "percent": round(100 * session.progress_done / session.progress_total)
                 if session.progress_total else 0}
    if session.status != SchedulingSession.DONE:
        return ctx
    query = HintTableForm(request.GET).values()
    placements = session.placements.order_by("index")
    mismatch, counts, ctx["span_chart"] = _done_summary(session.pk, session.finished_at)
    try:
        pod_query = outcomes.PodQuery.parse(request.GET)
    except outcomes.BadQuery as exc:  # a stale or mistyped link: say so, list every pod
        pod_query, ctx["filter_error"] = outcomes.PodQuery(), str(exc)
    filtered = pod_query.apply(session, session.placements.all(), list(mismatch))
    shown = filtered.only("id", "index", "namespace", "job", "task", "pod", "status", "node_id", "node_name", "cpus",
                          "predicted", "admitted", "admitted_numa", "predicted_cpus", "message", "kubelet_reason",
                          "session_id")
    page = Paginator(shown, PODS_PER_PAGE).get_page(query["pods_page"])
    # the scheduler predicted other CPUs than the kubelet pinned: a badge on the row
    ctx["differs"] = {p.index for p in page
                      if _prediction_differs(p.predicted_cpus and str(CPUSet(int(p.predicted_cpus, 16))), p)}
    ctx["pods"] = page
    ctx["pod_query"], ctx["outcome_counts"] = pod_query, counts
    ctx["filter_qs"] = urlencode(pod_query.items())
    ctx["outcome_choices"], ctx["sort_choices"] = outcomes.OUTCOMES, outcomes.SORTS
    ctx["outcome_label"] = outcomes.OUTCOMES.get(pod_query.outcome, "")
    ctx["node_ids"] = {p.node_name: p.node_id for p in page if p.node_id is not None}
    chosen = None
    if query["pod"] is not None:
        chosen = placements.filter(index=query["pod"]).first()
    if chosen is None and pod_query.active:  # the first pod of the filtered list
        chosen = filtered.first()
    if chosen is None:  # default: the first pod that was not admitted, else the first pod
        chosen = placements.exclude(admitted=True).first() or placements.first()
    if chosen is not None:
        ctx.update(_pod_context(request, session, chosen, page=True))
    return ctx


def _prediction_differs(predicted: str, placement: Placement) -> bool:
    """Whether the scheduler's predicted CPUs (list format) differ from those the kubelet admitted."""
    return bool(predicted) and bool(placement.admitted) and CPUSet.parse(predicted) != CPUSet.parse(
        placement.cpus or "")


@lru_cache(maxsize=32)
def _done_summary(pk: int, finished_at: datetime | None) -> tuple[tuple[int, ...], dict, SafeString]:
    """A done session's mismatched pods, outcome counts and NUMA span chart (pods by the NUMA nodes their resources
    sit on): scans of every placement row (0.3 s at 10,000 pods), read once per process, since a done session's
    rows never change (keyed by its finish time too, so a new session with a reused id is read anew)."""
    session = SchedulingSession.objects.get(pk=pk)
    mismatch = outcomes.mismatched(session)  # the counts and a mismatch filter both need it
    return tuple(mismatch), outcomes.counts(session, mismatch), charts.span_chart(results.span_counts(session))


@requires("scheduling.view_schedulingsession")
@require_GET
def session_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_object_or_404(SchedulingSession.objects.select_related("cluster"), pk=pk)
    return render(request, "pages/session.html", _session_context(request, session))


@requires("scheduling.view_schedulingsession")
@require_GET
def session_progress(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The polled fragment: progress while pending/running; results (no hx-trigger) once finished."""
    session = get_object_or_404(SchedulingSession.objects.select_related("cluster"), pk=pk)
    return render(request, "pages/_session.html", _session_context(request, session))


def _pod_request(session: SchedulingSession, placement: Placement) -> list[tuple[str, str]]:
    """(container, "2 CPU · 4Gi memory · 1 nvidia.com/gpu") per container of the pod's task, as its job asks now
    (empty when the job is gone)."""
    template = Task.objects.filter(job__cluster_id=session.cluster_id, job__namespace=placement.namespace,
                                   job__name=placement.job, name=placement.task).values_list("template",
                                                                                             flat=True).first()
    if template is None:
        return []
    out = []
    for kind, containers in (("", template.get("containers") or ()), ("init ", template.get("init_containers") or ())):
        for c in containers:
            parts = []
            for resource, amount in sorted((c.get("requests") or {}).items(), key=lambda r: (r[0] != "cpu", r[0])):
                if resource == "cpu":
                    parts.append(f"{amount // 1000 if amount % 1000 == 0 else f'{amount}m'} CPU")
                elif resource == "memory" or resource.startswith("hugepages-"):
                    parts.append(f"{format_bytes(amount)} {resource}")
                else:
                    parts.append(f"{amount} {resource}")
            out.append((f"{kind}{c.get('name', '')}", " · ".join(parts) or "nothing (BestEffort)"))
    return out


def _pod_context(request: HtmxHttpRequest, session: SchedulingSession, placement: Placement,
                 page: bool = False) -> dict:
    """The pod panel. `page`: inside the session page, whose `reason` and `sort` filter the pod list, not the hint
    table (the hint table's own requests carry its parameters)."""
    detail = results.pod_records(session, [placement])[0]
    predicted = detail.get("predicted") or {}
    node_grid = None
    if placement.node_id is not None:
        node = Node.objects.filter(pk=placement.node_id).first()
        if node is not None:
            state = grid.node_state(node)
            node_grid = grid.render_grid(state, CPUSet.parse(placement.cpus or "").mask, grid_id="pod-grid")
    groups = detail.get("groups") or []
    admission = detail.get("admission") or {}
    rejected = placement.status == PodStatus.REJECTED
    ctx = {
        "placement": placement, "detail": detail, "predicted_cpus": predicted.get("cpus") or "",
        "predicted_order_dependent": bool(predicted.get("order_dependent")),
        "prediction_differs": _prediction_differs(predicted.get("cpus") or "", placement),
        "predicted_numa": predicted.get("numa") or [], "admitted_numa": detail.get("admitted_numa") or [],
        "node_grid": node_grid, "outcomes": detail.get("outcomes") or {},
        "omitted": detail.get("groups_omitted") or {},
        "summary_line": tables.summary_line(groups, placement.node_name, placement.reason,
                                            refused=_refusal(placement) if rejected else ""),
        "rejected": rejected,
        "pod_request": _pod_request(session, placement),
        "kubelet": tables.admission_rows(admission) if admission.get("decisions") else None,
        "node_ids_pod": {placement.node_name: placement.node_id} if placement.node_id else {},
    }
    params: QueryDict = request.GET
    if page:
        params = request.GET.copy()
        for name in ("reason", "sort"):
            params.pop(name, None)
    ctx.update(_hint_context(params, session, placement, groups))
    return ctx


def _refusal(placement: Placement) -> str:
    """The kubelet's verdict on a pod it refused: `SMTAlignmentError: requested 1 cpus not multiple ...`."""
    return ": ".join(t for t in (placement.kubelet_reason, placement.message) if t) or "refused"


def _hint_context(params: QueryDict, session: SchedulingSession, placement: Placement, groups: list) -> dict:
    query = HintTableForm(params).values()
    show, reason, sort, size, expand = (query[k] for k in ("show", "reason", "sort", "size", "expand"))
    picked = tables.filter_groups(tables.expand_groups(groups) if expand else groups, show, reason)
    picked = tables.sort_groups(picked, sort)
    if sort == "outcome" and placement.node_name:  # the chosen node's row first
        picked.sort(key=lambda g: placement.node_name not in (g.get("nodes") or ()))
    page = Paginator(picked, size).get_page(query["page"])
    verdicts = results.verdicts(session, {g["verdict"] for g in page})  # every group names its verdict
    listed = {n for g in page for n in g.get("nodes") or ()}  # every name shown links to its node's page
    known = Node.objects.filter(cluster_id=session.cluster_id, name__in=listed).values_list("name", "pk",
                                                                                          "num_numa_nodes")
    node_ids = {name: pk for name, pk, _w in known}
    widths = {name: width for name, _pk, width in known}
    rows = [tables.build_row(g, verdicts.get(g["verdict"]),
                             widths.get((g.get("nodes") or [""])[0]), placement.node_name) for g in page]
    every = len(tables.expand_groups(groups)) if expand else len(groups)  # rows before the filter, same mode
    return {"rows": rows, "rows_page": page, "show": show, "reason": reason, "sort": sort, "sorts": tables.SORTS,
            "size": size, "rows_total": len(picked), "rows_every": every, "reasons": tables.reasons_of(groups),
            "expand": expand, "hint_node_ids": node_ids,
            "hints_url": reverse("pages:session-hints", args=[session.pk, placement.index])}


@requires("scheduling.view_schedulingsession")
@require_GET
def session_pod(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    session = get_object_or_404(SchedulingSession.objects.select_related("cluster"), pk=pk)
    placement = get_object_or_404(Placement, session=session, index=index)
    if not request.htmx:
        return redirect(f"{reverse('pages:session', args=[pk])}?pod={index}")
    ctx = {"session": session, **_pod_context(request, session, placement)}
    return render(request, "pages/_pod.html", ctx)


@requires("scheduling.view_schedulingsession")
@require_GET
def session_hints(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    """The hint table alone: sorted, filtered (failed only, by reason) and paginated."""
    session = get_object_or_404(SchedulingSession, pk=pk)
    placement = get_object_or_404(Placement, session=session, index=index)
    groups = results.pod_records(session, [placement])[0]["groups"]
    ctx = {"session": session, "placement": placement, **_hint_context(request.GET, session, placement, groups)}
    return render(request, "pages/_hint_table.html", ctx)


@requires("scheduling.view_schedulingsession")
@require_GET
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    rows = SchedulingSession.objects.order_by("-id").values_list(*session_rows.COLUMNS)
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    return render(request, "pages/sessions.html", {"page": page, "rows": session_rows.render_rows(page)})
