"""Prometheus metrics at /metrics (prometheus_client's text format).

- `numaweb_request_seconds{view, method, status}`: request latency by view (URL name), method and status code, a
  histogram kept by `RequestTimer` in each web process. Every label comes from a closed set, so no request can
  add label sets without end (3,000 made-up methods once grew a scrape to megabytes): a method HTTP does not
  define is `other`, a path no view has `unresolved`, a status code outside HTTP's list `other`;
- read from the database at each scrape (the database is the queue's source of truth, and web and workers
  share nothing else): sessions by status, the queue's depth (pending sessions and comparison variants),
  live workers and the age of the newest heartbeat, engine seconds and pods placed per session (by profile),
  comparison variants by status and profile.

Access: a scrape sending `Authorization: Bearer <NUMAWEB_METRICS_TOKEN>`, or coming from an address or network
listed in `NUMAWEB_METRICS_ALLOWED_IPS` (the client address as numaweb.access.clients reads it); nothing else,
not even this machine (behind a local reverse proxy every request comes from 127.0.0.1). Several gunicorn
processes each keep their own histogram in their server's folder (numaweb.metrics_store) and a scrape sums
them (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http import HTTPStatus

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

from numaweb.access.clients import client_ip
from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.room.metrics import DefragCollector
from numaweb.scheduling.fleet import FleetCollector
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.models import WorkerHeartbeat

REQUEST_SECONDS = Histogram("numaweb_request_seconds",
                            "Time to answer a request, by view (URL name), method and status code",
                            ["view", "method", "status"],
                            buckets=(.005, .01, .025, .05, .1, .2, .3, .5, 1, 2, 5, 10))
#: the methods HTTP defines (RFC 9110, PATCH); any other is labelled OTHER
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"))
STATUSES = frozenset(str(int(code)) for code in HTTPStatus)
OTHER = "other"


class RequestTimer:
    """Middleware: times every request into REQUEST_SECONDS, labelled by the view that answered it
    (`static` for static files, `unresolved` for a path no view has), its method and its status code."""

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
        method = request.method if request.method in METHODS else OTHER
        status = str(response.status_code)
        REQUEST_SECONDS.labels(view, method, status if status in STATUSES else OTHER).observe(
            time.perf_counter() - start)
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
    """None when the scrape may proceed (its bearer token, or an allowed address), else the refusal."""
    token = settings.NUMAWEB_METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return None
    if _listed(client_ip(request), settings.NUMAWEB_METRICS_ALLOWED_IPS):
        return None
    if token:
        response = HttpResponse("a bearer token is required (NUMAWEB_METRICS_TOKEN)\n", status=401,
                                content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse("metrics are served only with NUMAWEB_METRICS_TOKEN or to NUMAWEB_METRICS_ALLOWED_IPS: "
                        "set one of them\n", status=403, content_type="text/plain")


def _listed(address: str, allowed: list[str]) -> bool:
    """`address` is one of `allowed` or in one of its networks (a malformed address is in none)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return any(ip in ipaddress.ip_network(entry, strict=False) for entry in allowed)


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
    database.register(DefragCollector())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(database)
        body = generate_latest(database)
    else:
        body = generate_latest(REGISTRY) + generate_latest(database)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
