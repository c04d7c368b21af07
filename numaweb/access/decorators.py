"""The pages' guard: the same permissions and public-read rule as the API, checked on the server."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from urllib.parse import urlsplit

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django_htmx.http import HttpResponseClientRedirect

from .roles import READ_METHODS, may


def requires(perm: str, *, write: str | None = None) -> Callable:
    """Guard a page view: `perm` to use it, `write` (when given) for POST and other writes.

    Anonymous visitors are sent to the login page (an HTMX request is told to send the whole window
    there), users lacking the permission get 403."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        def guarded(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            need = write if write and request.method not in READ_METHODS else perm
            if may(request, [need]):
                response: HttpResponse = view(request, *args, **kwargs)
                return response
            if request.user.is_authenticated:
                raise PermissionDenied(f"your role lacks {need}")
            htmx = getattr(request, "htmx", None)
            if htmx:
                back = urlsplit(htmx.current_url or "").path or request.path
                return HttpResponseClientRedirect(redirect_to_login(back)["Location"], status=401)
            return redirect_to_login(request.get_full_path())

        guarded.__dict__["required_permissions"] = (perm, write or perm)  # what tests/access checks per page
        return login_not_required(guarded)  # this guard decides (LoginRequiredMiddleware covers unguarded views)

    return decorate
