"""Who is asking: the client address that throttles and failed-login lock-outs count.

The socket's address (REMOTE_ADDR) unless NUMAWEB_TRUSTED_PROXIES says that many proxies of our own stand in
front: each appends the address it received from to X-Forwarded-For, so the client is the entry that many places
from the right. Anything further left was written by the client and is never believed (30 token requests with a
different X-Forwarded-For each once counted as 30 clients)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    proxies = settings.NUMAWEB_TRUSTED_PROXIES
    remote: str = request.META.get("REMOTE_ADDR", "")
    forwarded: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    chain = [part.strip() for part in forwarded.split(",") if part.strip()]
    return chain[-min(proxies, len(chain))] if chain else remote
