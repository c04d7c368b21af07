"""A cap on the lists a request may hold (the jobs a session or comparison names, a comparison's variants, a
job's tasks): more than NUMAWEB_MAX_LIST_ITEMS items is a 400 naming the field, decided on the raw input
before any item is validated (each id of a list of jobs costs a query)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ValidationError


def too_long(count: int) -> str:
    cap = settings.NUMAWEB_MAX_LIST_ITEMS
    return f"{count} items, more than the limit of {cap} (NUMAWEB_MAX_LIST_ITEMS)"


class CappedLists:
    """Serializer mixin: `capped_lists` names the list fields to cap."""

    capped_lists: tuple[str, ...] = ()

    def to_internal_value(self, data: Any) -> Any:
        errors = {}
        for name in self.capped_lists:
            values = data.getlist(name) if hasattr(data, "getlist") else data.get(name) if hasattr(data, "get") \
                else None
            if isinstance(values, list) and len(values) > settings.NUMAWEB_MAX_LIST_ITEMS:
                errors[name] = [too_long(len(values))]
        if errors:
            raise ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]
