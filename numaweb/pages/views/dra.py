"""Pods using Dynamic Resource Allocation devices (`inventory.dra`): one pod's page (its devices, the NUMA node of
each and where the engine read it, beside the NUMA nodes of its pinned CPUs and memory, and the misalignment
kinds) and a cluster's misaligned pods. Everything shown was judged by the engine at import and stored."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from numaweb.access.decorators import requires
from numaweb.inventory.models import PodAlignment


@requires("inventory.view_node")
@require_GET
def pod_alignment(request: HttpRequest, pk: int) -> HttpResponse:
    pod = get_object_or_404(PodAlignment.objects.select_related("cluster", "node"), pk=pk)
    return render(request, "pages/pod_alignment.html", {"pod": pod})
