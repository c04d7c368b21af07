"""Admin for jobs and their tasks."""

from django.contrib import admin

from .models import Job, Task


class TaskInline(admin.TabularInline):
    model = Task
    extra = 0


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "namespace", "queue", "priority", "min_available", "status", "source_format", "created_at"]
    list_filter = ["status", "source_format", "queue"]
    search_fields = ["name", "namespace"]
    inlines = [TaskInline]
