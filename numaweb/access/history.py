"""The audit trail: django-simple-history on clusters, nodes, allocations, jobs and sessions.

Each history row says what (`history_type`: + created, ~ changed, - deleted), when (`history_date`),
who (`history_user`, and `history_username`, kept when the account is deleted; for a management
command, the operating-system user who ran it) and from where (`history_source`: api, page, admin or
command). Writes made with `QuerySet.update()` or `bulk_create()` (session commits, progress) leave no row:
the session that made them has its own."""

from __future__ import annotations

import getpass
from contextvars import ContextVar
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models
from django.db.models import QuerySet
from django.dispatch import receiver
from simple_history.models import HistoricalRecords
from simple_history.signals import pre_create_historical_record

API, PAGE, ADMIN, COMMAND = "api", "page", "admin", "command"
SOURCE_CHOICES = [(API, "API"), (PAGE, "page"), (ADMIN, "admin site"), (COMMAND, "command")]

_forced: ContextVar[str | None] = ContextVar("history_source", default=None)


class SourcedHistory(models.Model):
    history_source = models.CharField(max_length=16, choices=SOURCE_CHOICES, default=COMMAND,
                                      help_text="where the change was made")
    history_username = models.CharField(max_length=150, blank=True, default="",
                                        help_text="who made it, kept if the account is deleted")

    class Meta:
        abstract = True


def audited(**kwargs: Any) -> HistoricalRecords:
    """The history manager the audited models declare (`history = audited()`)."""
    return HistoricalRecords(bases=[SourcedHistory], **kwargs)


def current_source() -> str:
    """api, admin or page by the path of the request being served; command when there is none."""
    request = getattr(HistoricalRecords.context, "request", None)
    if request is None:
        return COMMAND
    path = request.path_info
    if path.startswith("/api/"):
        return API
    if path.startswith("/admin/"):
        return ADMIN
    return PAGE


@receiver(pre_create_historical_record, dispatch_uid="access-history-source")
def _stamp(sender: type[models.Model], history_instance: SourcedHistory, history_user: AbstractBaseUser | None = None,
           **kwargs: Any) -> None:
    source = current_source()
    history_instance.history_source = source
    if history_user is not None:
        history_instance.history_username = history_user.get_username()
    elif source == COMMAND:
        try:
            history_instance.history_username = getpass.getuser()
        except (KeyError, OSError):  # no login name in this environment (a container without one)
            history_instance.history_username = ""


ACTIONS = {"+": "created", "~": "changed", "-": "deleted"}


def history_rows(*histories: QuerySet[Any], limit: int = 20) -> list[dict]:
    """The newest `limit` records of these history querysets together, each with what it is about and the
    fields that changed since the record before."""
    records = [r for qs in histories for r in qs.order_by("-history_date", "-history_id")[:limit]]
    records.sort(key=lambda r: (r.history_date, r.history_id), reverse=True)
    rows = []
    for record in records[:limit]:
        previous = record.prev_record if record.history_type == "~" else None
        changed = [c.field for c in record.diff_against(previous).changes] if previous is not None else []
        label = getattr(record, "name", "") or getattr(record, "pod", "") or f"#{record.id}"
        rows.append({"record": record, "action": ACTIONS.get(record.history_type, record.history_type),
                     "what": f"{record.instance_type._meta.verbose_name} {label}", "changed": changed})
    return rows
