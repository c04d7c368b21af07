"""Prometheus metrics at /metrics (prometheus_client's text format).

- `numaweb_request_seconds{view, method}`: request latency by view (URL name), a histogram kept by
  `RequestTimer` in each web process;
- read from the database at each scrape (the database is the queue's source of truth, and web and workers
  share nothing else): sessions by status, the queue's depth (pending sessions and comparison variants),
  live workers and the age of the newest heartbeat, engine seconds and pods placed per session (by profile),
  comparison variants by status and profile.

Access: with `NUMAWEB_METRICS_TOKEN` set, a scrape must send `Authorization: Bearer <token>`; without it,
only requests from the machine itself (127.0.0.1, ::1) are answered. Several gunicorn processes each keep
their own histogram: set `PROMETHEUS_MULTIPROC_DIR` (an empty folder, the same for all of them) and a scrape
sums them (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.scheduling.fleet import FleetCollector
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.models import WorkerHeartbeat

REQUEST_SECONDS = Histogram("numaweb_request_seconds", "Time to answer a request, by view (URL name) and method",
                            ["view", "method"],
                            buckets=(.005, .01, .025, .05, .1, .2, .3, .5, 1, 2, 5, 10))
LOCAL = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


class RequestTimer:
    """Middleware: times every request into REQUEST_SECONDS, labelled by the view that answered it
    (`static` for static files, `unresolved` for a path no view has)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None:
            view = match.view_name or match._func_path
        else:
            view = "static" if request.path.startswith(settings.STATIC_URL) else "unresolved"
        REQUEST_SECONDS.labels(view, request.method).observe(time.perf_counter() - start)
        return response


class DatabaseCollector(Collector):
    """What the database says at scrape time: sessions, queue, workers, engine time, comparisons."""

    def collect(self) -> Iterator[Metric]:

        sessions = GaugeMetricFamily("numaweb_sessions", "Scheduling sessions by status", labels=["status"])
        counts = dict(SchedulingSession.objects.values_list("status").annotate(n=Count("id")).values_list(
            "status", "n"))
        for status in SchedulingSession.Status.values:
            sessions.add_metric([status], counts.get(status, 0))
        yield sessions

        queue = GaugeMetricFamily("numaweb_queue_depth", "Work waiting for a worker", labels=["kind"])
        queue.add_metric(["session"], counts.get(SchedulingSession.PENDING, 0))
        queue.add_metric(["comparison_variant"],
                         ComparisonVariant.objects.filter(status=Comparison.PENDING).count())
        yield queue

        now = timezone.now()
        alive = WorkerHeartbeat.objects.filter(
            seen_at__gte=now - timedelta(seconds=settings.NUMAWEB_WORKER_TIMEOUT)).count()
        yield GaugeMetricFamily("numaweb_workers_alive", "Workers whose heartbeat is within NUMAWEB_WORKER_TIMEOUT",
                                value=alive)
        last = WorkerHeartbeat.objects.order_by("-seen_at").values_list("seen_at", flat=True).first()
        yield GaugeMetricFamily("numaweb_worker_heartbeat_age_seconds",
                                "Seconds since the newest worker heartbeat (NaN: no worker ever seen)",
                                value=(now - last).total_seconds() if last else float("nan"))

        engine = SummaryMetricFamily("numaweb_session_engine_seconds", "Engine time of finished sessions",
                                     labels=["profile"])
        placed = CounterMetricFamily("numaweb_session_pods_placed", "Pods placed by finished sessions",
                                     labels=["profile"])
        pods = SummaryMetricFamily("numaweb_session_pods_placed_per_session", "Pods placed per finished session",
                                   labels=["profile"])
        for profile, n, engine_ms, pods_placed in (
                SchedulingSession.objects.filter(status=SchedulingSession.DONE).values_list("profile")
                .annotate(n=Count("id"), ms=Sum("engine_ms"), placed=Sum("pods_placed"))
                .values_list("profile", "n", "ms", "placed").order_by("profile")):
            engine.add_metric([profile], n, (engine_ms or 0) / 1000)
            placed.add_metric([profile], pods_placed or 0)
            pods.add_metric([profile], n, pods_placed or 0)
        yield engine
        yield placed
        yield pods

        variants = GaugeMetricFamily("numaweb_comparison_variants", "Comparison variants by status and profile",
                                     labels=["status", "profile"])
        for status, profile, n in (ComparisonVariant.objects.values_list("status", "profile")
                                   .annotate(n=Count("id")).values_list("status", "profile", "n")
                                   .order_by("status", "profile")):
            variants.add_metric([status, profile], n)
        yield variants


def _allowed(request: HttpRequest) -> HttpResponse | None:
    """None when the scrape may proceed, else the refusal."""
    token = settings.NUMAWEB_METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            response = HttpResponse("a bearer token is required (NUMAWEB_METRICS_TOKEN)\n", status=401,
                                    content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        return None
    if request.META.get("REMOTE_ADDR") not in LOCAL:
        return HttpResponse("metrics are served to this machine only unless NUMAWEB_METRICS_TOKEN is set\n",
                            status=403, content_type="text/plain")
    return None


@login_not_required
@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    refused = _allowed(request)
    if refused is not None:
        return refused
    database = CollectorRegistry()
    database.register(DatabaseCollector())
    database.register(FleetCollector())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(database)
        body = generate_latest(database)
    else:
        body = generate_latest(REGISTRY) + generate_latest(database)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
