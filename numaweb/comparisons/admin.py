from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import Comparison, ComparisonVariant


class VariantInline(admin.TabularInline):
    model = ComparisonVariant
    fields = readonly_fields = ("index", "label", "status", "error", "engine_ms")
    extra = 0
    can_delete = False


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    """Read-only: comparisons are asked for through the pages or the API."""

    list_display = ["id", "cluster", "created_at", "finished_at"]
    readonly_fields = ["cluster", "jobs", "shape", "snapshot", "changed_nodes", "created_at", "finished_at"]
    inlines = [VariantInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Comparison]:
        """The list never shows a comparison's snapshot of node generations (its page reads its own)."""
        return super().get_queryset(request).defer("snapshot")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
