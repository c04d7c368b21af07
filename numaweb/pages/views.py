"""The pages (function views). Full pages for plain requests, `_fragment` templates for HTMX ones.

Every decision shown comes from the engine: node state from the inventory services, what-if from
`scheduler_core.kubelet.admission.admit_pod(commit=False)`, session results from the rows the Celery task
wrote (the engine's explain records)."""

from __future__ import annotations

from collections import Counter

from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import push_url, reswap, retarget
from django_htmx.middleware import HtmxDetails

from numaweb.access.decorators import requires
from numaweb.access.history import history_rows
from numaweb.comparisons import charts
from numaweb.comparisons import services as comparison_services
from numaweb.comparisons import views as comparisons
from numaweb.comparisons.forms import HeadroomForm
from numaweb.inventory import checks, kubelet_config, snapshot
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs import services as job_services
from numaweb.jobs.forms import JobFilterForm
from numaweb.jobs.models import Job, Task
from numaweb.links import id_link
from numaweb.room.views import room_context
from numaweb.scheduling import results
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import Placement, SchedulingSession
from numaweb.scheduling.pod_search import find_pods
from numaweb.scheduling.store import mask_of
from scheduler_core.errors import EngineError
from scheduler_core.formats._common import MAX_INPUT_BYTES
from scheduler_core.formats.snapshot import MAX_SNAPSHOT_BYTES
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.scheduler.compare import span_histogram

from . import cluster_map, grid, session_rows, tables, uploads, usage
from .forms import (
    ClusterMapForm,
    HintTableForm,
    JobForm,
    KubeletConfigForm,
    NodeFilterForm,
    SessionForm,
    SnapshotImportForm,
    StateCheckForm,
    WhatIfForm,
)


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it: `request.htmx` says whether (and where) HTMX asked."""

    htmx: HtmxDetails


NODES_PER_PAGE = 48
PODS_PER_PAGE = 50
JOBS_PER_PAGE = 50
NAMESPACES_LISTED = 200  # the namespace filter's suggestions
POLL = "every 500ms"


# -- dashboard --------------------------------------------------------------------------------------
@requires("inventory.view_node")
@require_GET
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    """Nodes filtered and paged on the server (HTMX swaps the list), each card a NUMA usage strip;
    aggregates over the filtered nodes: free CPUs per NUMA node size, nodes per policy. Usage comes
    from `usage` (cached per node generation); only the cards shown are rendered."""
    form = NodeFilterForm(request.GET or None)
    rows = Node.objects.all()
    filters = form.cleaned_data if form.is_valid() else {}
    if filters.get("cluster"):
        rows = rows.filter(cluster=filters["cluster"])
    if filters.get("policy"):
        rows = rows.filter(topology_manager_policy=filters["policy"])
    keys = list(rows.order_by("cluster__name", "name")
                .values_list("pk", "generation", "updated_at", "topology_manager_policy"))
    usages = usage.usage_of([(pk, (generation, updated)) for pk, generation, updated, _p in keys])
    policy_of = {pk: policy for pk, _g, _u, policy in keys}
    ids = [pk for pk in policy_of if pk in usages]
    if filters.get("min_free") is not None:
        ids = [pk for pk in ids if usages[pk].free >= filters["min_free"]]
    if filters.get("min_numa_free") is not None:
        ids = [pk for pk in ids if usages[pk].best_numa_free >= filters["min_numa_free"]]
    page = Paginator(ids, NODES_PER_PAGE).get_page(request.GET.get("page"))
    shown = Node.objects.select_related("cluster").defer("topology").in_bulk(list(page))
    query = request.GET.copy()
    query.pop("page", None)
    room, room_form = _headroom(request, list(shown.values()))
    policies = Counter(policy_of[pk] for pk in ids)
    ctx = {"form": form, "page": page, "total": len(ids), "query": query.urlencode(),
           "cards": [(shown[pk], usages[pk], usage.strip(shown[pk].name, usages[pk]),
                      room["nodes"].get(pk) if room else None) for pk in page],
           "numa_sizes": usage.by_numa_size(usages[pk] for pk in ids),
           "policies": sorted(policies.items()),
           "headroom": room, "headroom_form": room_form, "strip_legend": usage.LEGEND}
    if request.htmx and request.htmx.target == "node-list":
        return render(request, "pages/_node_list.html", ctx)
    ctx["sessions"] = SchedulingSession.objects.select_related("cluster").order_by("-id")[:10]
    ctx["clusters"] = Cluster.objects.order_by("name").only("pk", "name")
    ctx["node_count"] = len(keys) if not filters else Node.objects.count()
    return render(request, "home.html", ctx)


def _headroom(request: HttpRequest, rows: list[Node]) -> tuple[dict | None, HeadroomForm]:
    """The dashboard's headroom box: when asked (hr-* parameters), how many more pods of the shape a
    dry-run session of the profile would place, for each cluster shown, by node id."""
    asked = any(key.startswith(HeadroomForm.prefix + "-") for key in request.GET)
    form = HeadroomForm(request.GET if asked else None, initial={"cpu": "4", "memory": "8Gi", "profile": "aligned"})
    if not asked or not form.is_valid():
        return None, form
    shape, profile = form.cleaned_data["shape"], form.cleaned_data["profile"]
    room: dict = {"shape": shape.to_dict(), "profile": profile, "clusters": [], "nodes": {}}
    clusters = {row.cluster_id: row.cluster for row in rows}
    for cluster in sorted(clusters.values(), key=lambda c: c.name):
        try:
            result = comparison_services.cluster_headroom(cluster, shape, profile)
        except EngineError as exc:
            form.add_error(None, f"cluster {cluster.name}: {exc}")
            continue
        ids = dict(Node.objects.filter(cluster=cluster).values_list("name", "pk"))
        room["clusters"].append({"cluster": cluster, "total": result["total"], "rejected": result["rejected"],
                                 "at_least": result["at_least"], "stopped": result["stopped"]})
        room["nodes"].update({ids[n["node"]]: n for n in result["nodes"]})
    return room, form


# -- node page --------------------------------------------------------------------------------------
def _node_context(node: Node, highlight: int = 0) -> dict:
    state = grid.node_state(node)
    return {
        "node": node, "state": state, "grid": grid.render_grid(state, highlight, grid_id="grid"),
        "owners": state.owners, "bars": grid.memory_bars(state), "devices": grid.devices_by_numa(state),
        "distances": grid.distance_matrix(state), "kubelet": inventory.kubelet_dict(node),
        "free_numa": state.free_per_numa(), "check_form": StateCheckForm(), "kubelet_form": KubeletConfigForm(),
    }


@requires("inventory.view_node")
@require_GET
def node_detail(request: HttpRequest, pk: int) -> HttpResponse:
    node = get_object_or_404(Node.objects.select_related("cluster"), pk=pk)
    ctx = _node_context(node)
    ctx["whatif"] = WhatIfForm(initial={"cpu": "4", "memory": "4Gi", "guaranteed": True})
    ctx["history"] = history_rows(node.history.all(), Allocation.history.filter(node_id=node.pk))
    return render(request, "pages/node.html", ctx)


@requires("access.run_whatif")
@require_POST
def node_whatif(request: HttpRequest, pk: int) -> HttpResponse:
    """This node's hint table for a pasted pod (admit_pod with commit=False), and the CPUs it would
    get highlighted on the grid (an out-of-band swap of the grid)."""
    node = get_object_or_404(Node.objects.select_related("cluster"), pk=pk)
    form = WhatIfForm(request.POST)
    ctx: dict = {"node": node, "form": form}
    highlight = 0
    if form.is_valid():
        state = grid.node_state(node)
        if state.engine is None:
            form.add_error(None, state.error)
        else:
            try:
                result = admit_pod(state.engine, form.cleaned_data["pod"], commit=False)
            except EngineError as exc:
                form.add_error(None, str(exc))
            else:
                ctx["result"] = tables.admission_view(result)
                highlight = result.cpus.mask
                ctx["highlight_count"] = highlight.bit_count()
    if not request.htmx:  # htmx swaps 2xx responses only; a plain POST with errors gets 422
        full = _node_context(node, highlight)
        full.update(ctx, whatif=form)
        return render(request, "pages/node.html", full, status=200 if form.is_valid() else 422)
    state = grid.node_state(node)
    ctx["grid_oob"] = grid.render_grid(state, highlight, grid_id="grid", oob=True)
    return render(request, "pages/_whatif.html", ctx)


def _upload(form, field: str, limit: int = MAX_INPUT_BYTES) -> bytes | None:
    upload = form.cleaned_data.get(field)
    if upload is None:
        return None
    if upload.size > limit:
        form.add_error(field, f"{upload.size} bytes is larger than the {limit >> 20} MiB limit")
        return None
    return upload.read()


@requires("access.run_whatif")
@require_http_methods(["GET", "POST"])
def node_check_state(request: HttpRequest, pk: int) -> HttpResponse:
    """The node's real kubelet state files against the engine's replay: per container predicted vs
    actual, on the thread grid with every mismatch highlighted, and the verdict. Stores nothing."""
    node = get_object_or_404(Node.objects.select_related("cluster"), pk=pk)
    form = StateCheckForm(request.POST or None, request.FILES or None)
    ctx: dict = {"node": node, "form": form}
    if request.method == "POST" and form.is_valid():
        files = {f: _upload(form, f) for f in ("cpu_state", "memory_state", "pods", "kubelet_config")}
        if not form.errors:
            try:
                result = checks.check_node_state(node, files["cpu_state"], files["memory_state"], files["pods"],
                                                 files["kubelet_config"], form.planned_settings())
            except EngineError as exc:
                field = (exc.field or "").split(":")[-1]
                form.add_error(field if field in files or field in form.PLANNED else
                               None if (exc.field or "").startswith("planned_settings") else "cpu_state", str(exc))
            else:
                ctx["result"] = result
                ctx["grid"] = grid.render_state_check(node, result)
                ctx["pods_on_node"] = checks.pods_on_node(node)
    return render(request, "pages/state_check.html", ctx, status=400 if form.errors else 200)


@requires("inventory.view_node", write="inventory.change_node")
@require_http_methods(["GET", "POST"])
def node_kubelet_config(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the node's settings as a config.yaml download. POST: take the settings from the node's
    KubeletConfiguration (the node page again, or the form with the field's error)."""
    node = get_object_or_404(Node.objects.select_related("cluster"), pk=pk)
    if request.method == "GET":
        response = HttpResponse(kubelet_config.export(node), content_type="application/yaml")
        response["Content-Disposition"] = f'attachment; filename="{node.name}-config.yaml"'
        return response
    form = KubeletConfigForm(request.POST, request.FILES)
    if form.is_valid():
        data = _upload(form, "file")
        if data is not None:
            try:
                kubelet_config.apply(node, data)
            except EngineError as exc:
                form.add_error("file", str(exc))
            else:
                return redirect("pages:node", pk=node.pk)
    ctx = _node_context(node)
    ctx.update(kubelet_form=form, whatif=WhatIfForm(initial={"cpu": "4", "memory": "4Gi", "guaranteed": True}),
               history=history_rows(node.history.all(), Allocation.history.filter(node_id=node.pk)))
    return render(request, "pages/node.html", ctx, status=400)


@requires("access.import_inventory")
@require_http_methods(["GET", "POST"])
def cluster_import(request: HttpRequest) -> HttpResponse:
    """Import a kubectl snapshot into a cluster in two steps: the file is first previewed (a dry run: what
    would change, nothing changed) and kept under a token; confirming imports it. The report shows what
    changed and every disagreement."""
    from django.db import transaction

    form = SnapshotImportForm(request.POST or None, request.FILES or None)
    ctx: dict = {"form": form, "clusters": Cluster.objects.order_by("name")}
    if request.method == "POST" and form.is_valid():
        token = form.cleaned_data["upload"] if not form.cleaned_data.get("file") else ""
        data = uploads.read(token) if token else _upload(form, "file", MAX_SNAPSHOT_BYTES)
        if token and data is None:
            form.add_error("file", "the previewed file is no longer kept (over an hour old?): choose it again")
        if data is not None:
            flags = {"prune": form.cleaned_data["prune"], "allow_empty": form.cleaned_data["allow_empty"],
                     "dry_run": not token}
            try:
                with transaction.atomic():
                    cluster, _ = Cluster.objects.get_or_create(name=form.cleaned_data["cluster"])
                    ctx["report"] = snapshot.import_snapshot(cluster, data, **flags)
                    ctx["cluster"] = cluster
                    if flags["dry_run"]:
                        transaction.set_rollback(True)  # a new cluster too is only created on confirmation
            except (EngineError, snapshot.EmptySnapshot) as exc:
                form.add_error("file", str(exc))
            else:
                if token:
                    uploads.forget(token)
                else:
                    ctx["upload"] = uploads.keep(data)
    return render(request, "pages/cluster_import.html", ctx, status=400 if form.errors else 200)


@requires("inventory.view_node")
@require_GET
def cpu_detail(request: HttpRequest, pk: int) -> HttpResponse:
    node = get_object_or_404(Node, pk=pk)
    state = grid.node_state(node)
    raw = request.GET.get("cpu") or ""
    if not raw.isdigit():  # a click beside the cells: nothing to show, nothing to swap
        return HttpResponse(status=204)
    cpu_id = int(raw)
    topo = state.topology
    if topo is None or cpu_id not in topo.cpu_info:
        return HttpResponseBadRequest("no such CPU on this node")
    cpu = topo.cpu_info[cpu_id]
    bit = 1 << cpu_id
    owner = state.owner_of.get(cpu_id)
    allocations = [a for a in node.allocations.all() if owner is not None and a.pod == owner.pod]
    return render(request, "pages/_cpu_detail.html", {
        "node": node, "cpu": cpu, "owner": owner, "allocations": allocations,
        "reserved": bool(bit & state.reserved), "free": bool(bit & state.free),
        "siblings": str(CPUSet(topo.core_cpus[cpu.core])),
    })


# -- cluster map -------------------------------------------------------------------------------------
@requires("inventory.view_node")
@require_GET
def cluster_map_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Every node of the cluster as one mark, grouped by pool and machine shape, coloured by the measure
    chosen (`cluster_map`); a click opens the node."""
    cluster = get_object_or_404(Cluster, pk=pk)
    form = ClusterMapForm(cluster, request.GET or None, initial={"measure": "best", "size": 4})
    measure, size, session = "best", 4, None
    if form.is_bound and form.is_valid():
        measure, size, session = (form.cleaned_data["measure"], form.cleaned_data["size"] or 4,
                                  form.cleaned_data["session"])
    groups, unreadable = cluster_map.measure_values(cluster.pk, measure, size, session and session.pk)
    ctx = {"cluster": cluster, "others": Cluster.objects.exclude(pk=cluster.pk).order_by("name"), "form": form,
           "svg": cluster_map.render(groups, measure, id_link("pages:node")), "measure": cluster_map.MEASURES[measure],
           "legend": cluster_map.legend(measure, size), "session": session, "unreadable": unreadable,
           "nodes": sum(len(g.nodes) for g in groups), "groups": len(groups)}
    return render(request, "pages/cluster_map.html", ctx, status=400 if form.errors else 200)


# -- pod search ---------------------------------------------------------------------------------------
POD_MATCHES = 100


@requires("inventory.view_node")
@require_GET
def pod_search(request: HttpRequest) -> HttpResponse:
    """Find any pod by pod, job or namespace name (the navigation bar's search box): where each one is held,
    on which NUMA nodes, who wrote it and its latest session placement (`scheduling.pod_search`)."""
    query = (request.GET.get("q") or "").strip()[:512]
    raw = request.GET.get("cluster") or ""
    cluster = int(raw) if raw.isdigit() else None
    ctx: dict = {"q": query, "cluster": cluster, "clusters": Cluster.objects.order_by("name"), "limit": POD_MATCHES}
    if query:
        ctx["count"], matches = find_pods(query, cluster, POD_MATCHES)
        ctx["matches"] = [m.to_dict() for m in matches]
    return render(request, "pages/pods.html", ctx)


@requires("inventory.view_node")
@require_GET
def help_page(request: HttpRequest) -> HttpResponse:
    """How to read the pages: hint notation, Volcano's predictions, usage strips (linked from each)."""
    return render(request, "pages/help.html")


# -- jobs --------------------------------------------------------------------------------------------
def page_cluster(request: HttpRequest, form=None) -> Cluster | None:
    """The cluster the jobs page works in: the one a posted form names, else `?cluster=<id>`, else the
    first by name (None when there is no cluster)."""
    raw = (form.data.get(form.add_prefix("cluster")) if form is not None and form.is_bound
           else request.GET.get("cluster"))
    chosen = Cluster.objects.filter(pk=raw).first() if str(raw or "").isdigit() else None
    return chosen or Cluster.objects.order_by("name").first()


def _jobs_context(request: HttpRequest, form: JobForm | None = None, session_form: SessionForm | None = None) -> dict:
    """The jobs page in one cluster: one page of its jobs (filtered by status, namespace and name on the
    server), and forms that submit into it and schedule or compare its jobs without listing them."""
    cluster = page_cluster(request, form or session_form)
    return {**_job_list_context(request, cluster), "cluster": cluster, "clusters": Cluster.objects.order_by("name"),
            "form": form or JobForm(initial={"cluster": cluster, "namespace": "default", "task": "main",
                                             "replicas": 1, "guaranteed": True}),
            "session_form": session_form or SessionForm(initial={"cluster": cluster, "profile": "volcano",
                                                                 "dry_run": True, "scope": "all"}),
            **comparisons.form_context(cluster=cluster)}


def _job_list_context(request: HttpRequest, cluster: Cluster | None) -> dict:
    """One page of the cluster's jobs as filtered, newest first; the filter's values for the forms that
    take "the jobs matching the filter"; the query without the page for the pager's links."""
    filter_form = JobFilterForm(request.GET, auto_id="job-filter-%s")  # ids apart from the job form's
    filters = filter_form.filters()
    jobs = job_services.filter_jobs(Job.objects.filter(cluster=cluster), **filters)
    page = Paginator(jobs.defer("manifest").order_by("-id"), JOBS_PER_PAGE).get_page(request.GET.get("page"))
    counts = dict(Task.objects.filter(job__in=[j.pk for j in page]).values("job").annotate(n=Count("id"))
                  .values_list("job", "n"))
    for job in page:
        job.task_count = counts.get(job.pk, 0)
    query = request.GET.copy()
    query.pop("page", None)
    query["cluster"] = cluster.pk if cluster else ""
    return {"page": page, "filter_form": filter_form, "filters": filters, "query": query.urlencode(),
            "namespaces": list(Job.objects.filter(cluster=cluster).order_by("namespace")
                               .values_list("namespace", flat=True).distinct()[:NAMESPACES_LISTED])}


@requires("jobs.view_job", write="jobs.add_job")
@require_http_methods(["GET", "POST"])
def job_list(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = JobForm(request.POST)
        job = form.save() if form.is_valid() else None
        if job is not None:
            url = reverse("pages:job", args=[job.pk])
            if request.htmx:
                response = HttpResponse(status=204)
                response["HX-Redirect"] = url
                return response
            return redirect(url)
        if request.htmx:  # htmx swaps 2xx responses only: the form comes back with its errors as a 200
            return render(request, "pages/_job_form.html", {"form": form})
        return render(request, "pages/jobs.html", _jobs_context(request, form), status=422)
    if request.htmx and request.htmx.target == "job-list":
        return render(request, "pages/_job_list.html", _job_list_context(request, page_cluster(request)))
    return render(request, "pages/jobs.html", _jobs_context(request))


class _Replicas:
    """A job's pods as a sequence of (task, replica index) that a Paginator slices without building them all."""

    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = tasks
        self.total = sum(t.replicas for t in tasks)

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, item: slice) -> list[tuple[Task, int]]:
        start, stop, _ = item.indices(self.total)
        out, offset = [], 0
        for t in self.tasks:
            lo, hi = max(start - offset, 0), min(stop - offset, t.replicas)
            out.extend((t, i) for i in range(lo, hi))
            offset += t.replicas
        return out


@requires("jobs.view_job")
@require_GET
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The job, its status (derived from what its pods hold) and one page of its pods."""
    job = get_object_or_404(Job.objects.select_related("cluster").prefetch_related("tasks"), pk=pk)
    page = Paginator(_Replicas(list(job.tasks.all())), PODS_PER_PAGE).get_page(request.GET.get("page"))
    uids = {}
    for t, i in page:
        name = f"{job.name}-{t.name}-{i}"
        uids[f"{job.namespace}/{name}"] = (t, name)
    held = Allocation.objects.filter(job=job, pod__in=list(uids)).select_related("node")
    by_pod: dict[str, list[Allocation]] = {}
    for a in held:
        by_pod.setdefault(a.pod, []).append(a)
    latest = {}
    for p in Placement.objects.filter(session__cluster=job.cluster_id, namespace=job.namespace, job=job.name,
                                      pod__in=[n for _t, n in uids.values()]).order_by("session_id"):
        latest[p.pod] = p
    states: dict[int, grid.NodeState] = {}
    pods = []
    for uid, (task, name) in uids.items():
        allocs = by_pod.get(uid, [])
        placement = latest.get(name)
        node = allocs[0].node if allocs else (placement.node if placement else None)
        mask = 0
        for a in allocs:
            mask |= CPUSet.parse(a.cpus or "").mask
        if not allocs and placement is not None:
            mask = CPUSet.parse(placement.cpus or "").mask
        mini = None
        if node is not None:
            if node.pk not in states:
                states[node.pk] = grid.node_state(node)
            mini = grid.render_grid(states[node.pk], mask, compact=True)
        pods.append({"name": name, "uid": uid, "task": task, "node": node, "cpus": str(CPUSet(mask)) if mask else "",
                     "held": bool(allocs), "placement": placement, "grid": mini})
    sessions = job.sessions.order_by("-id")[:10]
    return render(request, "pages/job.html", {"job": job, "tasks": job.tasks.all(), "pods": pods, "page": page,
                                              "allocations": job.allocations.count(), "sessions": sessions,
                                              "history": history_rows(job.history.all()),
                                              **room_context(job, sessions)})


@requires("jobs.change_job")
@require_POST
def job_finish(request: HttpRequest, pk: int) -> HttpResponse:
    """Finish the job: every allocation its pods hold is released in the same transaction."""
    job = get_object_or_404(Job, pk=pk)
    inventory.finish_job(job)
    return redirect(reverse("pages:job", args=[job.pk]))


# -- sessions -----------------------------------------------------------------------------------------
@requires("scheduling.add_schedulingsession")
@require_POST
def session_start(request: HtmxHttpRequest) -> HttpResponse:
    form = SessionForm(request.POST)
    if not form.is_valid():
        if request.htmx:
            return _form_back(request, form, "")
        return render(request, "pages/jobs.html", _jobs_context(request, session_form=form), status=422)
    data = form.cleaned_data
    jobs = list(data["jobs"]) or None
    error = ""
    try:
        session = scheduling.start_session(data["cluster"], data["profile"], data["dry_run"], jobs)
    except scheduling.BrokerUnavailable as exc:
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
    ctx["span_chart"] = _span_chart(session)
    shown = placements.only("id", "index", "job", "task", "pod", "node_name", "cpus", "predicted", "admitted",
                            "admitted_numa", "predicted_cpus", "message", "kubelet_reason", "session_id")
    page = Paginator(shown, PODS_PER_PAGE).get_page(query["pods_page"])
    for p in page:  # the scheduler predicted other CPUs than the kubelet pinned: a badge on the row
        p.differs = _prediction_differs(p.predicted_cpus and str(CPUSet(int(p.predicted_cpus, 16))), p)
    ctx["pods"] = page
    chosen = None
    if query["pod"] is not None:
        chosen = placements.filter(index=query["pod"]).first()
    if chosen is None:  # default: the first pod that was not admitted, else the first pod
        chosen = placements.exclude(admitted=True).first() or placements.first()
    if chosen is not None:
        ctx.update(_pod_context(request, session, chosen))
    return ctx


def _prediction_differs(predicted: str, placement: Placement) -> bool:
    """Whether the scheduler's predicted CPUs (list format) differ from those the kubelet admitted."""
    return bool(predicted) and bool(placement.admitted) and CPUSet.parse(predicted) != CPUSet.parse(
        placement.cpus or "")


def _span_chart(session: SchedulingSession):
    """NUMA span per pod from the placement rows: the NUMA nodes each admitted pod's resources sit on."""
    masks = [mask_of(numa) or 0 if admitted else None
             for admitted, numa in session.placements.values_list("admitted", "admitted_numa")]
    return charts.span_chart(span_histogram(masks))


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


def _pod_context(request: HtmxHttpRequest, session: SchedulingSession, placement: Placement) -> dict:
    detail = results.pod_records(session, [placement])[0]
    predicted = detail.get("predicted") or {}
    node_grid = None
    if placement.node_id is not None:
        node = Node.objects.filter(pk=placement.node_id).first()
        if node is not None:
            state = grid.node_state(node)
            node_grid = grid.render_grid(state, CPUSet.parse(placement.cpus or "").mask, grid_id="pod-grid")
    groups = detail.get("groups") or []
    ctx = {
        "placement": placement, "detail": detail, "predicted_cpus": predicted.get("cpus") or "",
        "predicted_order_dependent": bool(predicted.get("order_dependent")),
        "prediction_differs": _prediction_differs(predicted.get("cpus") or "", placement),
        "predicted_numa": predicted.get("numa") or [], "admitted_numa": detail.get("admitted_numa") or [],
        "node_grid": node_grid, "outcomes": detail.get("outcomes") or {},
        "omitted": detail.get("groups_omitted") or {},
        "summary_line": tables.summary_line(groups, placement.node_name, placement.reason),
    }
    ctx.update(_hint_context(request, session, placement, groups))
    return ctx


def _hint_context(request: HtmxHttpRequest, session: SchedulingSession, placement: Placement, groups: list) -> dict:
    query = HintTableForm(request.GET).values()
    show, reason, sort, size, expand = (query[k] for k in ("show", "reason", "sort", "size", "expand"))
    picked = tables.filter_groups(tables.expand_groups(groups) if expand else groups, show, reason)
    picked = tables.sort_groups(picked, sort)
    if sort == "outcome" and placement.node_name:  # the chosen node's row first
        picked.sort(key=lambda g: placement.node_name not in (g.get("nodes") or ()))
    page = Paginator(picked, size).get_page(query["page"])
    verdicts = results.verdicts(session, {g.get("verdict") for g in page})
    names = {g["nodes"][0] for g in page if g.get("nodes")}
    widths = dict(Node.objects.filter(cluster_id=session.cluster_id, name__in=names)
                  .values_list("name", "num_numa_nodes"))
    rows = [tables.build_row(g, verdicts.get(g.get("verdict")),
                             widths.get((g.get("nodes") or [""])[0]), placement.node_name) for g in page]
    every = len(tables.expand_groups(groups)) if expand else len(groups)  # rows before the filter, same mode
    return {"rows": rows, "rows_page": page, "show": show, "reason": reason, "sort": sort, "sorts": tables.SORTS,
            "size": size, "rows_total": len(picked), "rows_every": every, "reasons": tables.reasons_of(groups),
            "expand": expand,
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
    ctx = {"session": session, "placement": placement, **_hint_context(request, session, placement, groups)}
    return render(request, "pages/_hint_table.html", ctx)


@requires("scheduling.view_schedulingsession")
@require_GET
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    rows = SchedulingSession.objects.order_by("-id").values_list(*session_rows.COLUMNS)
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    return render(request, "pages/sessions.html", {"page": page, "rows": session_rows.render_rows(page)})
