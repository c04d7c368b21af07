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
from numaweb.scheduling.pod_search import find_aligned, find_pods
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
    keys = list(rows.annotate(updated_key=usage.UPDATED_KEY).order_by("cluster__name", "name")
                .values_list("pk", "generation", "updated_key", "topology_manager_policy"))
    ids, usages, numa_sizes, policies = _summary(keys, filters.get("min_free"), filters.get("min_numa_free"))
    page = Paginator(ids, NODES_PER_PAGE).get_page(request.GET.get("page"))
    shown = Node.objects.select_related("cluster").defer("topology").in_bulk(list(page))
    query = request.GET.copy()
    query.pop("page", None)
    room, room_form = _headroom(request, list(shown.values()))
    agents = {r.node_id: agent_status(r) for r in NodeReport.objects.filter(node_id__in=list(page))}
    ctx = {"form": form, "page": page, "total": len(ids), "query": query.urlencode(),
           "cards": [(shown[pk], usages[pk], usage.strip(shown[pk].name, usages[pk]),
                      room["nodes"].get(pk) if room else None, agents.get(pk)) for pk in page],
           "numa_sizes": numa_sizes, "policies": policies,
           "headroom": room, "headroom_form": room_form, "strip_legend": usage.LEGEND}
    if request.htmx and request.htmx.target == "node-list":
        return _busy(render(request, "pages/_node_list.html", ctx), room, swap=True)
    ctx["sessions"] = SchedulingSession.objects.select_related("cluster").order_by("-id")[:10]
    ctx["clusters"] = Cluster.objects.order_by("name").only("pk", "name")
    ctx["node_count"] = len(keys) if not filters else Node.objects.count()
    return _busy(render(request, "home.html", ctx), room)


#: what `_summary` answers: ids, usages, free CPUs by NUMA node size, nodes by policy
Summary = tuple[list[int], dict[int, usage.Usage], list[dict], list[tuple[str, int]]]
#: the last answers of `_summary`, by (min_free, min_numa_free): its nodes' keys, and what they gave
_SUMMARIES: dict[tuple, tuple[list[tuple], Summary]] = {}


def _summary(keys: list[tuple], min_free: int | None, min_numa_free: int | None) -> Summary:
    """The filtered nodes' ids in order, every node's usage, and the aggregates over the filtered nodes (free
    CPUs per NUMA node size, nodes per policy) of `keys` (id, generation, updated_key, policy), in order. The
    same list of keys (every node's version, its policy, the order) gives the same answer, so the last one per
    filter is kept and the 5,000 nodes' aggregates are not summed again on each call."""
    key = (min_free, min_numa_free)
    hit = _SUMMARIES.get(key)
    if hit is not None and hit[0] == keys:
        return hit[1]
    usages = usage.usage_of([(pk, (generation, updated)) for pk, generation, updated, _p in keys])
    policy_of = {pk: policy for pk, _g, _u, policy in keys}
    ids = [pk for pk in policy_of if pk in usages]
    if min_free is not None:
        ids = [pk for pk in ids if usages[pk].free >= min_free]
    if min_numa_free is not None:
        ids = [pk for pk in ids if usages[pk].best_numa_free >= min_numa_free]
    answer: Summary = (ids, usages, usage.by_numa_size(usages[pk] for pk in ids),
              sorted(Counter(policy_of[pk] for pk in ids).items()))
    if len(_SUMMARIES) >= 16:
        _SUMMARIES.pop(next(iter(_SUMMARIES)))
    _SUMMARIES[key] = (keys, answer)
    return answer


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
    on which NUMA nodes, who wrote it and its latest session placement (`scheduling.pod_search`); with
    `misaligned`, only the pods whose DRA devices sit off their pinned CPUs' or memory's NUMA nodes."""
    query = (request.GET.get("q") or "").strip()[:512]
    raw = request.GET.get("cluster") or ""
    cluster = int(raw) if raw.isdigit() else None
    misaligned = request.GET.get("misaligned") == "true"
    ctx: dict = {"q": query, "cluster": cluster, "clusters": Cluster.objects.order_by("name"), "limit": POD_MATCHES,
                 "misaligned": misaligned}
    if misaligned:
        ctx["count"], matches = find_aligned(cluster, True, query, POD_MATCHES)
        ctx["matches"] = [m.to_dict() for m in matches]
    elif query:
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
