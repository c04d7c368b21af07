"""Project-level views outside the pages app: a health check for docker-compose and monitors."""

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from . import health


@login_not_required
@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and broker answer and a worker was seen within NUMAWEB_WORKER_TIMEOUT, else 503;
    the body names each part: {"status", "database", "broker", "workers": {status, alive, last_seen_seconds}}, with
    the details of a failure (internal addresses) for signed-in users only."""
    healthy, body = health.report(detailed=request.user.is_authenticated)
    return JsonResponse(body, status=200 if healthy else 503)
