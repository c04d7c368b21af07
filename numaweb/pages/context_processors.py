"""Template context every page gets: whether a worker is alive (for the base template's banner)."""

from django.http import HttpRequest

from numaweb import health


def workers(request: HttpRequest) -> dict:
    # a callable: templates call it only where it is used, so fragments that never ask cost no query
    return {"workers_alive": health.workers_alive}
