"""Form pieces for choosing jobs in one cluster, shared by the jobs page's session form and the comparison
form. A cluster may hold thousands of jobs, so a form never lists them: it takes every schedulable job of
the cluster (the default), the schedulable ones matching the page's filter, or the ones picked on the page
shown; another cluster's job is refused by name."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from numaweb.inventory.models import Cluster

from . import services as job_services
from .models import Job

ALL, FILTER, PICKED = "all", "filter", "picked"
SCOPES = [(ALL, "every schedulable job of this cluster"), (FILTER, "the schedulable jobs matching the filter"),
          (PICKED, "the jobs picked below")]


def chosen_cluster(form: forms.Form) -> Cluster | None:
    """The cluster a form works in: the one posted, else its initial one (the page's chosen cluster)."""
    if form.is_bound:
        raw = str(form.data.get(form.add_prefix("cluster")) or "")
        # isdigit() alone takes "²", which int() (and so the pk lookup) refuses
        return Cluster.objects.filter(pk=raw).first() if raw.isascii() and raw.isdigit() else None
    initial = form.initial.get("cluster")
    return initial if isinstance(initial, Cluster) or initial is None else Cluster.objects.filter(pk=initial).first()


class JobFilterForm(forms.Form):
    """The jobs list's filter (the jobs page's query, and the part of it the session and comparison forms
    carry for "the jobs matching the filter")."""

    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Job.Status.choices])
    namespace = forms.CharField(required=False, max_length=63,
                                widget=forms.TextInput(attrs={"list": "job-namespaces", "autocomplete": "off"}))
    q = forms.CharField(required=False, max_length=253, label="name contains")

    def filters(self) -> dict[str, str]:
        """The valid filter values (an invalid one is left out, and reported by the form)."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return {name: data.get(name) or "" for name in self.fields if name not in self.errors}


class CappedJobsField(forms.ModelMultipleChoiceField):
    """Jobs by id, at most NUMAWEB_MAX_LIST_ITEMS of them, counted before they are looked up."""

    def clean(self, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) > settings.NUMAWEB_MAX_LIST_ITEMS:
            raise forms.ValidationError(f"{len(value)} items, more than the limit of "
                                        f"{settings.NUMAWEB_MAX_LIST_ITEMS} (NUMAWEB_MAX_LIST_ITEMS)")
        return super().clean(value)


class ClusterJobsMixin(forms.Form):
    """A form with a `cluster` (set by the page, hidden), a `scope` and, for scope "picked", `jobs` (ids
    ticked on the page). Clean puts the chosen jobs in `jobs`: an empty list means every schedulable job
    of the cluster (what a session started without a list takes)."""

    scope = forms.ChoiceField(choices=SCOPES, required=False, initial=ALL, widget=forms.RadioSelect, label="jobs")
    jobs = CappedJobsField(queryset=Job.objects.all(), required=False, widget=forms.MultipleHiddenInput,
                           help_text="the jobs picked on the page (scope: picked)")
    chosen: Cluster | None = None

    def scope_jobs(self) -> None:
        self.chosen = chosen_cluster(self)

    def filter_form(self) -> JobFilterForm:
        """The page's filter as posted with this form (its fields carry this form's prefix)."""
        return JobFilterForm(self.data if self.is_bound else None, prefix=self.prefix)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        cluster, picked = data.get("cluster"), list(data.get("jobs") or ())
        if cluster is None or self.errors:
            return data
        scope = data.get("scope") or (PICKED if picked else ALL)
        if scope == PICKED:
            if not picked:
                self.add_error("scope", "no job is picked: tick jobs in the list, or choose another scope")
                return data
            try:
                job_services.check_cluster(picked, cluster)
            except job_services.NotSchedulable as exc:
                self.add_error("jobs", str(exc))
        elif picked:
            self.add_error("scope", f"{len(picked)} job{'s are' if len(picked) > 1 else ' is'} picked: choose "
                                    f"“{SCOPES[2][1]}” to take them, or untick them")
        elif scope == FILTER:
            filter_form = self.filter_form()
            filters = filter_form.filters()
            if filter_form.errors:
                self.add_error("scope", f"the filter is not valid: {filter_form.errors.as_text()}")
                return data
            picked = job_services.schedulable_jobs(cluster, **filters)
            if not picked:
                said = ", ".join(f"{k}={v}" for k, v in filters.items() if v) or "none"
                self.add_error("scope", f"no schedulable job of cluster {cluster} matches the filter ({said})")
        data["scope"], data["jobs"] = scope, picked
        return data
