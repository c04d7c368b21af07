"""The API's permission class: Django model permissions decide every request, reads included.

GET/HEAD/OPTIONS need `view_<model>`, POST `add_`, PUT/PATCH `change_`, DELETE `delete_`, for the model of
the view's queryset. A view states other needs per action (or per method for plain API views):

    required_permissions = {"rerun": ["scheduling.add_schedulingsession"], "finish": ["jobs.change_job"]}

A view with no model needs `access.browse` to read and must declare its writes (undeclared: only
superusers). Anonymous requests get 401 (the token scheme is announced), users lacking a permission 403."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission

from .roles import READ_METHODS, may

ACTIONS = {"GET": "view", "HEAD": "view", "OPTIONS": "view", "POST": "add", "PUT": "change", "PATCH": "change",
           "DELETE": "delete"}
UNDECLARED = "access.undeclared_write"


def required_permissions(request, view) -> list[str]:
    declared = getattr(view, "required_permissions", None) or {}
    key = getattr(view, "action", None) or request.method.lower()
    if key in declared:
        return list(declared[key])
    model = _model(view)
    if model is None:
        return ["access.browse"] if request.method in READ_METHODS else [UNDECLARED]
    return [f"{model._meta.app_label}.{ACTIONS.get(request.method, 'change')}_{model._meta.model_name}"]


def _model(view):
    queryset = getattr(view, "queryset", None)
    if queryset is None and hasattr(view, "get_queryset"):
        try:
            queryset = view.get_queryset()
        except AssertionError:  # a generic view without a queryset
            return None
    return getattr(queryset, "model", None)


class RolePermission(BasePermission):
    def has_permission(self, request, view) -> bool:
        return may(request, required_permissions(request, view))


def locked_out(username: str) -> bool:
    """The account has as many failed logins within the lock-out time as django-axes locks at (counted as axes
    counts them: its attempt rows for that name, whatever the address)."""
    from axes.models import AccessAttempt

    since = timezone.now() - settings.AXES_COOLOFF_TIME
    failures = AccessAttempt.objects.filter(username=username, attempt_time__gte=since).aggregate(
        n=Sum("failures_since_start"))["n"] or 0
    return failures >= settings.AXES_FAILURE_LIMIT


class LockoutAwareTokenAuthentication(TokenAuthentication):
    """DRF's token scheme, refusing (401) the tokens of an account locked out for failed logins until it is
    unlocked: a guessed password must not be worked around by a token obtained earlier."""

    def authenticate_credentials(self, key):
        user, token = super().authenticate_credentials(key)
        if locked_out(user.get_username()):
            raise AuthenticationFailed("this account is locked out after too many failed logins; its tokens work "
                                       "again once it is unlocked (manage.py axes_reset_username)")
        return user, token
