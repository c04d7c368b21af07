"""A node's page and its actions (what-if, state check, kubelet settings, a CPU's detail), a cluster's
map and the snapshot import."""

from __future__ import annotations

import re

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.forms import Form
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from numaweb.access.decorators import requires
from numaweb.access.history import history_rows
from numaweb.inventory import checks, kubelet_config, rejected, snapshot
from numaweb.inventory import services as inventory
from numaweb.inventory.agent import agent_status
from numaweb.inventory.models import Allocation, Cluster, Node, NodeReport
from numaweb.links import id_link
from scheduler_core.errors import EngineError
from scheduler_core.model.cpuset import CPUSet

from .. import cluster_map, grid, tables, uploads
from ..forms import ClusterMapForm, KubeletConfigForm, SnapshotImportForm, StateCheckForm, WhatIfForm
from .common import HtmxHttpRequest


def _node_context(node: Node, highlight: int = 0) -> dict:
    state = grid.node_state(node)
    return {
        "node": node, "state": state, "grid": grid.render_grid(state, highlight, grid_id="grid"),
        "owners": state.owners, "bars": grid.memory_bars(state), "devices": grid.devices_by_numa(state),
        "distances": grid.distance_matrix(state), "kubelet": inventory.kubelet_dict(node),
        "free_numa": state.free_per_numa(), "check_form": StateCheckForm(), "kubelet_form": KubeletConfigForm(),
        "agent": agent_status(NodeReport.objects.filter(node=node).first()),
        "rejected_rows": rejected.rejected_pods(node.cluster_id, node=node.name)[:100],
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
def node_whatif(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """This node's hint table for a pasted pod (checks.what_if: admitted, nothing kept), and the CPUs it would
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
                result = checks.what_if(state.engine, form.cleaned_data["pod"])
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


def _upload(form: Form, field: str, limit: int = checks.FILE_UPLOAD_LIMIT) -> bytes | None:
    upload: UploadedFile | None = form.cleaned_data.get(field)
    if upload is None:
        return None
    size = upload.size or 0
    if size > limit:
        form.add_error(field, f"{size} bytes is larger than the {limit >> 20} MiB limit")
        return None
    data: bytes = upload.read()
    return data


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
        cpu_state = files["cpu_state"]  # a required field: None only with an error
        if not form.errors and cpu_state is not None:
            try:
                result = checks.check_node_state(node, cpu_state, files["memory_state"], files["pods"],
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
        # a header cannot carry a newline (BadHeaderError, a 500) and a quote would end the name: names come from
        # admins and snapshot imports, so the file is named from the safe characters of the node's
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", node.name).strip("._") or f"node-{node.pk}"
        response["Content-Disposition"] = f'attachment; filename="{safe}-config.yaml"'
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
    form = SnapshotImportForm(request.POST or None, request.FILES or None)
    ctx: dict = {"form": form, "clusters": Cluster.objects.order_by("name")}
    if request.method == "POST" and form.is_valid():
        token = form.cleaned_data["upload"] if not form.cleaned_data.get("file") else ""
        # what the preview was, and what a confirmation must be: this user, this cluster, these options
        bound = {"user": request.user.pk, "cluster": form.cleaned_data["cluster"],
                 "prune": form.cleaned_data["prune"], "allow_empty": form.cleaned_data["allow_empty"]}
        try:
            data = uploads.read(token, bound) if token else _upload(form, "file", checks.SNAPSHOT_UPLOAD_LIMIT)
        except uploads.NotThePreview as exc:
            form.add_error(None, str(exc))
            data = None
        else:
            if token and data is None:
                form.add_error("file", "the previewed file is no longer kept (over an hour old?): choose it again")
        if data is not None:
            flags = {"prune": form.cleaned_data["prune"], "allow_empty": form.cleaned_data["allow_empty"],
                     "dry_run": not token}
            name = form.cleaned_data["cluster"]
            try:
                if flags["dry_run"]:  # reads only, no lock; a new cluster too is only created on confirmation
                    cluster = Cluster.objects.filter(name=name).first() or Cluster(name=name)
                    ctx["report"] = snapshot.import_snapshot(cluster, data, **flags)
                else:
                    with transaction.atomic():
                        cluster, _ = Cluster.objects.get_or_create(name=name)
                        ctx["report"] = snapshot.import_snapshot(cluster, data, **flags)
                ctx["cluster"] = cluster
            except (EngineError, snapshot.EmptySnapshot) as exc:
                form.add_error("file", str(exc))
            else:
                if token:
                    uploads.forget(token)
                else:
                    ctx["upload"] = uploads.keep(data, bound)
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
    svg, marks = cluster_map.render(groups, measure, id_link("pages:node"))
    ctx = {"cluster": cluster, "others": Cluster.objects.exclude(pk=cluster.pk).order_by("name"), "form": form,
           "svg": svg, "marks": marks, "measure": cluster_map.MEASURES[measure],
           "legend": cluster_map.legend(measure, size), "session": session, "unreadable": unreadable,
           "nodes": sum(len(g.nodes) for g in groups), "groups": len(groups)}
    return render(request, "pages/cluster_map.html", ctx, status=400 if form.errors else 200)
