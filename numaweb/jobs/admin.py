"""Admin for jobs and their tasks: the same bounds as the API and the pages (names, priority, replicas,
pods per job, minAvailable); deleting or finishing a job releases what its pods hold."""

from django import forms
from django.contrib import admin, messages

from numaweb.access.admin import AuditedAdmin
from numaweb.inventory import services as inventory
from scheduler_core.errors import EngineError

from . import bounds, services
from .models import Job, Task


def _raise(exc: bounds.OutOfBounds) -> None:
    raise forms.ValidationError(str(exc)) from exc


class JobForm(forms.ModelForm):
    class Meta:
        model = Job
        fields = ["cluster", "name", "namespace", "queue", "priority", "min_available", "source_format", "manifest"]

    def clean_name(self) -> str:
        try:
            bounds.check_subdomain(self.cleaned_data["name"], "job name", "name")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return self.cleaned_data["name"]

    def clean_namespace(self) -> str:
        try:
            bounds.check_label(self.cleaned_data["namespace"], "namespace", "namespace")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return self.cleaned_data["namespace"]

    def clean_priority(self) -> int:
        try:
            bounds.check_int32(self.cleaned_data["priority"], "priority", "priority")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return self.cleaned_data["priority"]


class TaskForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = ["name", "replicas", "topology_policy", "template"]

    def clean_name(self) -> str:
        try:
            bounds.check_label(self.cleaned_data["name"], "task name", "name")
        except bounds.OutOfBounds as exc:
            _raise(exc)
        return self.cleaned_data["name"]

    def clean_replicas(self) -> int:
        value, limit = self.cleaned_data["replicas"], bounds.settings.NUMAWEB_MAX_REPLICAS_PER_TASK
        if value > limit:
            raise forms.ValidationError(f"{value} is more than the limit of {limit} replicas per task "
                                        "(NUMAWEB_MAX_REPLICAS_PER_TASK)")
        return value

    def clean_template(self) -> dict:
        try:
            services.pod_from_stored("template", self.cleaned_data["template"])
        except (EngineError, TypeError, KeyError, AttributeError, ValueError) as exc:
            raise forms.ValidationError(f"not a pod template in engine units: {exc}") from exc
        return self.cleaned_data["template"]


class TaskFormSet(forms.BaseInlineFormSet):
    """Across the tasks: pods per job, and the job's minAvailable within its replicas."""

    def clean(self) -> None:
        super().clean()
        total = sum(f.cleaned_data.get("replicas") or 0 for f in self.forms
                    if f.cleaned_data and not f.cleaned_data.get("DELETE"))
        limit = bounds.settings.NUMAWEB_MAX_PODS_PER_JOB
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
    search_fields = ["name", "namespace"]
    readonly_fields = ["status", "reason", "finished_at"]
    inlines = [TaskInline]
    actions = ["finish"]

    def get_readonly_fields(self, request, obj: Job | None = None) -> list[str]:
        """A job's cluster is chosen when it is created: its pods' allocations live in that cluster."""
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "cluster"] if obj is not None else fields

    def save_related(self, request, form, formsets, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        services.refresh_status([form.instance.pk])  # replicas or minAvailable may have changed

    def delete_model(self, request, obj: Job) -> None:
        inventory.delete_job(obj)

    def delete_queryset(self, request, queryset) -> None:
        for job in queryset:
            inventory.delete_job(job)

    @admin.action(description="Finish the selected jobs (release what their pods hold)")
    def finish(self, request, queryset) -> None:
        released = sum(inventory.finish_job(job) for job in queryset)
        self.message_user(request, f"finished {queryset.count()} job(s), released {released} allocation(s)",
                          messages.SUCCESS)
