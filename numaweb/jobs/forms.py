"""Form pieces for choosing jobs in one cluster, shared by the jobs page's session form and the comparison
form: only the chosen cluster's jobs are offered, and another cluster's job is refused by name."""

from __future__ import annotations

from django import forms

from numaweb.inventory.models import Cluster

from . import services as job_services
from .models import Job


def chosen_cluster(form: forms.Form) -> Cluster | None:
    """The cluster a form works in: the one posted, else its initial one (the page's chosen cluster)."""
    if form.is_bound:
        raw = form.data.get(form.add_prefix("cluster"))
        return Cluster.objects.filter(pk=raw).first() if str(raw or "").isdigit() else None
    initial = form.initial.get("cluster")
    return initial if isinstance(initial, Cluster) or initial is None else Cluster.objects.filter(pk=initial).first()


class ClusterJobsMixin(forms.Form):
    """A form with a `cluster` (set by the page, hidden) and `jobs`: only that cluster's jobs are listed; a
    job of another cluster posted anyway is refused with an error naming it (not "not a valid choice")."""

    chosen: Cluster | None = None

    def scope_jobs(self) -> None:
        self.chosen = cluster = chosen_cluster(self)
        shown = Job.objects.filter(cluster=cluster) if cluster is not None else Job.objects.none()
        self.fields["jobs"].widget.choices = forms.ModelMultipleChoiceField(queryset=shown).choices

    def clean(self) -> dict:
        data = super().clean()
        if data.get("cluster") is not None and data.get("jobs"):
            try:
                job_services.check_cluster(data["jobs"], data["cluster"])
            except job_services.NotSchedulable as exc:
                self.add_error("jobs", str(exc))
        return data
