from django.contrib import admin

from .models import Comparison, ComparisonVariant


class VariantInline(admin.TabularInline):
    model = ComparisonVariant
    fields = ["index", "label", "status", "error", "engine_ms"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    """Read-only: comparisons are asked for through the pages or the API."""

    list_display = ["id", "cluster", "created_at", "finished_at"]
    readonly_fields = ["cluster", "jobs", "shape", "snapshot", "changed_nodes", "created_at", "finished_at"]
    inlines = [VariantInline]

    def has_add_permission(self, request) -> bool:
        return False
