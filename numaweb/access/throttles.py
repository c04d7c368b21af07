"""API rate limits (DRF throttles): writes per user, and the token endpoint per client address.

Rates come from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] when a request arrives (not when the class is
imported), so settings changed at run time apply. The counts live in Django's cache, which every web process
shares (the database's cache table, or Redis with REDIS_URL: settings.CACHES); the client address is
`clients.client_ip`'s. Failed logins are counted by django-axes on top."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from .clients import client_ip
from .roles import READ_METHODS

if TYPE_CHECKING:  # DRF's views import the throttle and pagination classes its settings name
    from rest_framework.views import APIView


class _LiveRate(SimpleRateThrottle):
    def get_ident(self, request: Request) -> str:
        return client_ip(request)

    def get_rate(self) -> str | None:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope or "")  # "300/minute" (the stubs say a number)
        return rate if isinstance(rate, str) else None

    def allow_request(self, request: Request, view: APIView) -> bool:
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)


class WriteRateThrottle(_LiveRate, UserRateThrottle):
    """POST, PUT, PATCH and DELETE per user (reads are not limited)."""

    scope = "writes"

    def allow_request(self, request: Request, view: APIView) -> bool:
        return request.method in READ_METHODS or super().allow_request(request, view)


class TokenRateThrottle(_LiveRate, AnonRateThrottle):
    """Token requests per client address, whoever they claim to be."""

    scope = "auth-token"

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
