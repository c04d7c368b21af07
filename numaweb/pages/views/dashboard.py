"""The dashboard (the site's home: nodes filtered and paged, the headroom box), the pod search and the
help page."""

from __future__ import annotations

from collections import Counter

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from numaweb.access.decorators import requires
from numaweb.comparisons import services as comparison_services
from numaweb.comparisons.gate import Busy, headroom_slot
from numaweb.inventory import rejected
from numaweb.inventory.agent import agent_status
from numaweb.inventory.models import Cluster, Node, NodeReport
from numaweb.scheduling.models import SchedulingSession
from numaweb.scheduling.pod_search import find_pods
from scheduler_core.errors import EngineError

from .. import usage
from ..comparison_forms import HeadroomForm
from ..forms import NodeFilterForm
from .common import HtmxHttpRequest

NODES_PER_PAGE = 48
POD_MATCHES = 100


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
    agents = {r.node_id: agent_status(r) for r in NodeReport.objects.filter(node_id__in=list(page))}
    ctx = {"form": form, "page": page, "total": len(ids), "query": query.urlencode(),
           "cards": [(shown[pk], usages[pk], usage.strip(shown[pk].name, usages[pk]),
                      room["nodes"].get(pk) if room else None, agents.get(pk)) for pk in page],
           "numa_sizes": usage.by_numa_size(usages[pk] for pk in ids),
           "policies": sorted(policies.items()),
           "headroom": room, "headroom_form": room_form, "strip_legend": usage.LEGEND}
    if request.htmx and request.htmx.target == "node-list":
        return _busy(render(request, "pages/_node_list.html", ctx), room, swap=True)
    ctx["sessions"] = SchedulingSession.objects.select_related("cluster").order_by("-id")[:10]
    ctx["clusters"] = Cluster.objects.order_by("name").only("pk", "name")
    ctx["node_count"] = len(keys) if not filters else Node.objects.count()
    return _busy(render(request, "home.html", ctx), room)


def _busy(response: HttpResponse, room: dict | None, swap: bool = False) -> HttpResponse:
    """A page whose headroom question found every slot taken (numaweb.comparisons.gate): 429 with Retry-After,
    the box saying so; an htmx swap keeps 200 (htmx swaps no 4xx) so the message shows where it was asked."""
    if room and "busy" in room:
        response["Retry-After"] = str(room["busy"])
        if not swap:
            response.status_code = 429
    return response


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
            result = comparison_services.cluster_headroom(cluster, shape, profile, gate=headroom_slot)
        except Busy as exc:
            form.add_error(None, str(exc))
            room["busy"] = exc.retry_after
            break
        except EngineError as exc:
            form.add_error(None, f"cluster {cluster.name}: {exc}")
            continue
        ids = {row.name: row.pk for row in rows if row.cluster_id == cluster.pk}  # the cards shown
        room["clusters"].append({"cluster": cluster, "total": result["total"], "rejected": result["rejected"],
                                 "at_least": result["at_least"], "stopped": result["stopped"]})
        room["nodes"].update({ids[n["node"]]: n for n in result["nodes"] if n["node"] in ids})
    return room, form



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
        found = rejected.rejected_pods(cluster, query=query)
        ctx["rejected_count"], ctx["rejected_rows"] = found.count(), found[:POD_MATCHES]
    return render(request, "pages/pods.html", ctx)


@requires("inventory.view_node")
@require_GET
def help_page(request: HttpRequest) -> HttpResponse:
    """How to read the pages: hint notation, Volcano's predictions, usage strips (linked from each)."""
    return render(request, "pages/help.html")
