"""Admin for jobs and their tasks: the same bounds as the API and the pages (names, priority, replicas,
pods per job, minAvailable); deleting or finishing a job releases what its pods hold."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from numaweb.access.admin import AuditedAdmin
from scheduler_core.errors import EngineError

from . import bounds, lifecycle, services
from .models import Job, Task


def _raise(exc: bounds.OutOfBounds) -> None:
    raise forms.ValidationError(str(exc)) from exc


class JobForm(forms.ModelForm):
    class Meta:
        model = Job
        fields = ["cluster", "name", "namespace", "queue", "priority", "min_available", "source_format", "manifest"]

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        try:
            bounds.check_subdomain(name, "job name", "name")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return name

    def clean_namespace(self) -> str:
        namespace: str = self.cleaned_data["namespace"]
        try:
            bounds.check_label(namespace, "namespace", "namespace")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return namespace

    def clean_priority(self) -> int:
        priority: int = self.cleaned_data["priority"]
        try:
            bounds.check_int32(priority, "priority", "priority")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return priority


class TaskForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = ["name", "replicas", "topology_policy", "template"]

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        try:
            bounds.check_label(name, "task name", "name")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return name

    def clean_replicas(self) -> int:
        value: int = self.cleaned_data["replicas"]
        limit = settings.NUMAWEB_MAX_REPLICAS_PER_TASK
        if value > limit:
            raise forms.ValidationError(f"{value} is more than the limit of {limit} replicas per task "
                                        "(NUMAWEB_MAX_REPLICAS_PER_TASK)")
        return value

    def clean_template(self) -> dict[str, object]:
        template: dict[str, object] = self.cleaned_data["template"]
        try:
            services.pod_from_stored("template", template)
        except (EngineError, TypeError, KeyError, AttributeError, ValueError) as exc:
            raise forms.ValidationError(f"not a pod template in engine units: {exc}") from exc
        return template


class TaskFormSet(forms.BaseInlineFormSet):
    """Across the tasks: pods per job, and the job's minAvailable within its replicas."""

    def clean(self) -> None:
        super().clean()
        total = sum(f.cleaned_data.get("replicas") or 0 for f in self.forms
                    if f.cleaned_data and not f.cleaned_data.get("DELETE"))
        limit = settings.NUMAWEB_MAX_PODS_PER_JOB
        if total > limit:
            raise forms.ValidationError(f"the job has {total} pods, more than the limit of {limit} pods per job "
                                        "(NUMAWEB_MAX_PODS_PER_JOB)")
        minimum = self.instance.min_available
        if minimum is not None and minimum > total:
            raise forms.ValidationError(f"minAvailable ({minimum}) is more than the job's {total} replicas")


class TaskInline(admin.TabularInline):
    model = Task
    form = TaskForm
    formset = TaskFormSet
    extra = 0


@admin.register(Job)
class JobAdmin(AuditedAdmin):
    form = JobForm
    list_display = ["name", "namespace", "cluster", "queue", "priority", "min_available", "status", "source_format",
                    "created_at"]
    list_filter = ["cluster", "status", "source_format", "queue"]
    # 50 rows a page, not Django's 100: with thousands of rows the change list stays within a page's budget
    # (benchmarks/README.md, every page at 5,000 nodes)
    list_per_page = 50
    search_fields = ["name", "namespace"]
    readonly_fields = ["status", "reason", "finished_at"]
    inlines = [TaskInline]
    actions = ["finish"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        """Without the manifests, which the list never shows (a job's form reads its own)."""
        jobs: QuerySet[Job] = super().get_queryset(request)
        return jobs.defer("manifest")

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        """A job's cluster is chosen when it is created: its pods' allocations live in that cluster."""
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "cluster"] if obj is not None else fields

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: list[forms.BaseInlineFormSet],
                     change: bool) -> None:
        super().save_related(request, form, formsets, change)
        services.refresh_status([form.instance.pk])  # replicas or minAvailable may have changed

    def delete_model(self, request: HttpRequest, obj: Job) -> None:
        lifecycle.delete_job(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        for job in queryset:
            lifecycle.delete_job(job)

    @admin.action(description="Finish the selected jobs (release what their pods hold)")
    def finish(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        released = sum(lifecycle.finish_job(job) for job in queryset)
        self.message_user(request, f"finished {queryset.count()} job(s), released {released} allocation(s)",
                          messages.SUCCESS)
