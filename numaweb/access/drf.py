"""The API's permission class: DRF's `DjangoModelPermissions`, with reads checked too.

GET/HEAD/OPTIONS need `view_<model>`, POST `add_`, PUT/PATCH `change_`, DELETE `delete_` (another method
`change_`), for the model of the view's queryset. A view states other needs per action (or per method for
plain API views):

    required_permissions = {"rerun": ["scheduling.add_schedulingsession"], "finish": ["jobs.change_job"]}

A view with no model needs `access.browse` to read and must declare its writes (undeclared: only
superusers). With NUMAWEB_PUBLIC_READ anyone may make a read that needs only read permissions
(`roles.may`). Anonymous requests get 401 (the token scheme is announced), users lacking a permission 403."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Model
from rest_framework.permissions import DjangoModelPermissions

from .roles import READ_METHODS, may

if TYPE_CHECKING:  # DRF imports this module from its settings while rest_framework.views is still loading
    from rest_framework.request import Request
    from rest_framework.views import APIView

VIEW = "%(app_label)s.view_%(model_name)s"
UNDECLARED = "access.undeclared_write"


class RolePermission(DjangoModelPermissions):
    perms_map = {**DjangoModelPermissions.perms_map, "GET": [VIEW], "HEAD": [VIEW], "OPTIONS": [VIEW]}

    def has_permission(self, request: Request, view: APIView) -> bool:
        return may(request, self.required(request, view))

    def required(self, request: Request, view: APIView) -> list[str]:
        method = request.method or "GET"
        declared = getattr(view, "required_permissions", None) or {}
        key = getattr(view, "action", None) or method.lower()
        if key in declared:
            return list(declared[key])
        model = _model(view)
        if model is None:
            return ["access.browse"] if method in READ_METHODS else [UNDECLARED]
        # a method DRF's map lacks (TRACE, ...) is a write: the permission check answers before the 405
        return self.get_required_permissions(method if method in self.perms_map else "PUT", model)


def _model(view: APIView) -> type[Model] | None:
    """The model of the view's queryset: its `queryset` attribute first (a read of `get_queryset()` may
    look at the query, which a permission check must not answer for), None for a view without one."""
    queryset = getattr(view, "queryset", None)
    if queryset is None and hasattr(view, "get_queryset"):
        try:
            queryset = view.get_queryset()
        except AssertionError:  # a generic view without a queryset
            return None
    return getattr(queryset, "model", None)
