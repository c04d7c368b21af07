"""Project-level views outside the pages app: a health check for docker-compose and monitors, and the 404 of
an address nothing answers (JSON under /api/, as the schema documents every 404)."""

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from . import health


@login_not_required
@require_safe
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """The web's readiness: 200 when the database and broker answer, else 503 (GET or HEAD). The body names each
    part: {"status": ok|degraded|unavailable, "database", "broker", "workers": {status, alive, last_seen_seconds}};
    no live worker makes it "degraded", not 503: the pages still serve (with the banner) and queue work, and a
    worker's own health is probed on the worker (`manage.py check_worker`). The details of a failure (internal
    addresses) are for signed-in users only. `/healthz?live` checks nothing else:
    200 once this process serves requests (a liveness probe, which must not restart the web server because the
    database or the workers are away)."""
    if "live" in request.GET:
        return JsonResponse({"status": "ok"})
    healthy, body = health.report(detailed=request.user.is_authenticated)
    return JsonResponse(body, status=200 if healthy else 503)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 page, or under /api/ the API's error body."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
