"""Pods the kubelet rejected (`inventory.rejected`): one pod's page (its replayed admission as a hint
table, the sentence, the remedies cheapest first) and a cluster's view (counts by reason, node class and
resource, and the list)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from numaweb.access.decorators import requires
from numaweb.inventory import rejected
from numaweb.inventory.models import Cluster, RejectedPod

from .. import tables

#: rejected pods listed on a cluster's view (the counts cover them all)
LISTED = 200


@requires("inventory.view_node")
@require_GET
def rejected_pod(request: HttpRequest, pk: int) -> HttpResponse:
    pod = get_object_or_404(RejectedPod.objects.select_related("cluster", "node"), pk=pk)
    admission = pod.explanation.get("admission") or {}
    return render(request, "pages/rejected_pod.html", {
        "pod": pod, "row": rejected.as_row(pod), "result": tables.admission_rows(admission) if admission else None})


@requires("inventory.view_node")
@require_GET
def cluster_rejected(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    reason = request.GET.get("reason") or ""
    if reason not in rejected.KUBELET_REJECTIONS:
        reason = ""
    node = (request.GET.get("node") or "").strip()[:253]
    rows = rejected.rejected_pods(cluster.pk, reason, node)
    summary = rejected.summary(cluster)
    groups = [("reason", summary["by_reason"]), ("node class", summary["by_node_class"]),
              ("resource", summary["by_resource"])]
    return render(request, "pages/cluster_rejected.html", {
        "cluster": cluster, "summary": summary, "summary_groups": groups, "pods": rows[:LISTED], "count": rows.count(),
        "listed": LISTED, "reason": reason, "node": node, "reasons": rejected.KUBELET_REJECTIONS})
