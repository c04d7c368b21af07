"""Failed logins lock out the attacker, not the user (django-axes' database handler with one more rule).

Axes counts failures per user name *and* address (AXES_LOCKOUT_PARAMETERS): NUMAWEB_LOGIN_FAILURE_LIMIT wrong
passwords for one name from one address lock that pair out, so a guesser elsewhere cannot lock the user out, nor
the user's colleagues behind the same address. One address trying many names is held back too, at
NUMAWEB_LOGIN_ADDRESS_FAILURE_LIMIT failures whatever the names. Both for NUMAWEB_LOGIN_LOCKOUT_MINUTES; the user's
API tokens keep working throughout (numaweb.access.tokens)."""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest
from django.utils import timezone

from .clients import client_ip


def address_failures(address: str) -> int:
    """Failed logins from `address` within the lock-out time, whatever the names tried."""
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    return AccessAttempt.objects.filter(ip_address=address, attempt_time__gte=since).aggregate(
        n=Sum("failures_since_start"))["n"] or 0


class LockoutHandler(AxesDatabaseHandler):
    def is_locked(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> bool:
        if super().is_locked(request, credentials):
            return True
        return address_failures(client_ip(request)) >= settings.NUMAWEB_LOGIN_ADDRESS_FAILURE_LIMIT

    def user_login_failed(self, sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
                          **kwargs: Any) -> None:
        """Axes marks the request locked out (429) by the name and address's count; the address's too."""
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is not None and address_failures(client_ip(request)) >= \
                settings.NUMAWEB_LOGIN_ADDRESS_FAILURE_LIMIT:
            request.axes_locked_out = True  # type: ignore[attr-defined]
