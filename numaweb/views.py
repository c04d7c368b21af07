"""Minimal project-level views: a home page listing clusters and recent sessions (the full pages
are built elsewhere), and a health check for docker-compose."""

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from numaweb.inventory.models import Cluster
from numaweb.scheduling.models import SchedulingSession


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    clusters = Cluster.objects.all()
    sessions = SchedulingSession.objects.select_related("cluster")[:10]
    return render(request, "home.html", {"clusters": clusters, "sessions": sessions})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
