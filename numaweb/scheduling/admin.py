"""Sessions are read-only in the admin (they are written by the worker); failed ones, and running ones
whose worker is lost, can be re-run."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from numaweb.access.admin import AuditedAdmin
from numaweb.worker.runs import BrokerUnavailable

from . import services
from .models import Placement, SchedulingSession


@admin.register(SchedulingSession)
class SchedulingSessionAdmin(AuditedAdmin):
    list_display = ["id", "cluster", "profile", "dry_run", "status", "progress_done", "progress_total",
                    "pods_placed", "pods_total", "attempts", "engine_ms", "created_at", "heartbeat_at", "worker"]
    list_filter = ["status", "profile", "dry_run", "cluster"]
    actions = ["rerun"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Run the selected failed sessions (or running ones whose worker is lost) again")
    def rerun(self, request: HttpRequest, queryset: QuerySet[SchedulingSession]) -> None:
        queued = []
        for session in queryset:
            try:
                services.rerun_session(session)
                queued.append(str(session.pk))
            except (services.SessionNotRunnable, BrokerUnavailable) as exc:
                self.message_user(request, str(exc), messages.ERROR)
        if queued:
            self.message_user(request, f"queued again: session {', '.join(queued)}", messages.SUCCESS)


@admin.register(Placement)
class PlacementAdmin(admin.ModelAdmin):
    list_display = ["session", "index", "pod", "node_name", "cpus", "predicted", "admitted", "reason"]
    list_filter = ["predicted", "admitted"]
    # 50 rows a page, not Django's 100: with thousands of rows the change list stays within a page's budget
    # (benchmarks/README.md, every page at 5,000 nodes)
    list_per_page = 50
    search_fields = ["pod", "node_name", "job"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
