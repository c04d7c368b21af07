"""What the page modules share."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

PODS_PER_PAGE = 50


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it: `request.htmx` says whether (and where) HTMX asked."""

    htmx: HtmxDetails
