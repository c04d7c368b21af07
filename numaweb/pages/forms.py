"""Forms of the pages. Validation is the engine's (through the jobs services; a submitted job through the
submission service the API uses too): its messages are placed next to the field they name."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from numaweb.inventory.models import (
    CPU_MANAGER_CHOICES,
    MEMORY_MANAGER_CHOICES,
    TOPOLOGY_POLICY_CHOICES,
    TOPOLOGY_SCOPE_CHOICES,
    Cluster,
)
from numaweb.jobs import bounds, submission
from numaweb.jobs import services as job_services
from numaweb.jobs.forms import ClusterJobsMixin
from numaweb.jobs.models import Job
from numaweb.limits import FormJSONField
from numaweb.scheduling.models import SchedulingSession
from scheduler_core.errors import EngineError

from .cluster_map import MEASURES

POLICY_CHOICES = [("", "(none / from the template)"), *TOPOLOGY_POLICY_CHOICES]


def parse_devices(text: str) -> dict[str, str]:
    """`nvidia.com/gpu=1, example.com/fpga=2` → {resource: count text} (the engine checks counts)."""
    out: dict[str, str] = {}
    for part in (text or "").replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        resource, sep, amount = part.partition("=")
        if not sep or not resource.strip() or not amount.strip():
            raise forms.ValidationError(f"{part!r}: write devices as resource=count, e.g. nvidia.com/gpu=1")
        out[resource.strip()] = amount.strip()
    return out


class ResourcesMixin(forms.Form):
    cpu = forms.CharField(required=False, max_length=32, help_text='CPUs, e.g. "4" or "500m"',
                          widget=forms.TextInput(attrs={"placeholder": "4", "inputmode": "decimal"}))
    memory = forms.CharField(required=False, max_length=32, help_text='e.g. "8Gi"',
                             widget=forms.TextInput(attrs={"placeholder": "8Gi"}))
    devices = forms.CharField(required=False, max_length=1000, help_text="resource=count, comma separated",
                              widget=forms.TextInput(attrs={"placeholder": "nvidia.com/gpu=1"}))

    def clean_devices(self) -> dict[str, str]:
        return parse_devices(self.cleaned_data.get("devices") or "")

    def resources(self) -> dict[str, str]:
        res = {}
        if self.cleaned_data.get("cpu"):
            res["cpu"] = self.cleaned_data["cpu"]
        if self.cleaned_data.get("memory"):
            res["memory"] = self.cleaned_data["memory"]
        res.update(self.cleaned_data.get("devices") or {})
        return res


class SubmissionClusterField(forms.ModelChoiceField):
    """The page's chosen cluster, looked up by the submission service (its refusal, word for word the API's)."""

    def to_python(self, value: Any) -> Cluster | None:
        if value in self.empty_values:
            return None
        try:
            return submission.cluster_by_id(value)
        except submission.Refused as exc:
            raise forms.ValidationError(str(exc), code="invalid_choice") from exc


class JobForm(ResourcesMixin):
    """A job from a pasted manifest (Volcano Job / Pod YAML or JSON) or from the fields, in the page's
    chosen cluster. Checked and saved by the submission service (`numaweb.jobs.submission`), as the API's
    jobs are; its refusals sit next to the field they name."""

    cluster = SubmissionClusterField(queryset=Cluster.objects.all(), widget=forms.HiddenInput, required=False,
                                     help_text="the page's chosen cluster (left out: the only cluster)")

    manifest = forms.CharField(required=False, max_length=submission.MAX_MANIFEST,
                               error_messages={"max_length": submission.MANIFEST_TOO_LONG},
                               widget=forms.Textarea(attrs={"rows": 10}),
                               help_text="Volcano Job or Pod YAML; leave empty to use the fields")
    name = forms.CharField(required=False, max_length=253)
    namespace = forms.CharField(required=False, max_length=63, initial="default")
    task = forms.CharField(required=False, max_length=253, initial="main", label="task name")
    replicas = forms.IntegerField(required=False, min_value=0, max_value=bounds.INT32[1], initial=1)
    topology_policy = forms.ChoiceField(required=False, choices=POLICY_CHOICES)
    min_available = forms.IntegerField(required=False, min_value=0, max_value=bounds.INT32[1])
    guaranteed = forms.BooleanField(required=False, initial=True, label="limits = requests (Guaranteed)")

    def _refused(self, exc: submission.Refused) -> None:
        self.add_error(exc.field if exc.field in self.fields else None, str(exc))

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        manifest = data.get("manifest") or ""
        try:
            job = None if manifest.strip() else self._job_data(data)
            data["submission"] = submission.prepare(manifest, job, data.get("cluster"))
        except submission.Refused as exc:
            self._refused(exc)
        return data

    def _job_data(self, data: dict[str, Any]) -> dict[str, object]:
        """The one-task job the fields describe, in the API's JSON form."""
        resources = self.resources()
        if data.get("name") and not resources:
            raise submission.Refused("cpu", "ask for at least one resource (cpu, memory or a device)")
        container: dict[str, object] = {"name": data.get("task") or "main", "requests": resources}
        if data.get("guaranteed"):
            container["limits"] = dict(resources)
        job: dict[str, object] = {
            "name": data.get("name") or "", "namespace": data.get("namespace") or "default",
            "tasks": [{"name": data.get("task") or "main",
                       "replicas": 1 if data.get("replicas") is None else data["replicas"],
                       "topology_policy": data.get("topology_policy") or None,
                       "template": {"containers": [container]}}]}
        if data.get("min_available") is not None:
            job["min_available"] = data["min_available"]
        return job

    def save(self) -> Job | None:
        """The new job, or None with the error on the form when a concurrent create took the name first."""
        try:
            return submission.submit(self.cleaned_data["submission"])
        except submission.Refused as exc:
            self._refused(exc)
            return None


class WhatIfForm(ResourcesMixin):
    """A pod to try on one node: pasted YAML (Pod or Job: its first pod, the only one built) or
    CPU/memory/device fields."""

    manifest = forms.CharField(required=False, max_length=200_000, widget=forms.Textarea(attrs={"rows": 6}),
                               help_text="Pod YAML (or a Volcano Job: its first pod); or use the fields")
    guaranteed = forms.BooleanField(required=False, initial=True, label="limits = requests (Guaranteed)")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        manifest = (data.get("manifest") or "").strip()
        try:
            if manifest:
                job = job_services.engine_jobs_from_manifest(manifest)[0]
                bounds.check_job(job, manifest=True)
                data["pod"] = job.first_pod()
                if data["pod"] is None:
                    self.add_error("manifest", "the manifest has no pod (zero replicas?)")
            else:
                resources = self.resources()
                if not resources:
                    self.add_error("cpu", "ask for at least one resource (cpu, memory or a device)")
                    return data
                container = {"name": "what-if", "requests": resources}
                if data.get("guaranteed"):
                    container["limits"] = dict(resources)
                data["pod"] = job_services.pod_from_template("what-if", {"containers": [container]})
        except EngineError as exc:
            target = "manifest" if manifest else submission.field_of(exc)
            self.add_error(target if target in self.fields else None, str(exc))
        except bounds.OutOfBounds as exc:
            self.add_error("manifest", str(exc))
        return data


class SessionForm(ClusterJobsMixin):
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), widget=forms.HiddenInput)
    profile = forms.ChoiceField(choices=SchedulingSession.PROFILE_CHOICES, initial="volcano")
    dry_run = forms.BooleanField(required=False, initial=True, label="dry run (place without allocating)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scope_jobs()

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors or data.get("cluster") is None:
            return data
        jobs = list(data.get("jobs") or ())
        try:
            job_services.check_schedulable(jobs or job_services.schedulable_jobs(data["cluster"]), data["cluster"])
        except (job_services.NotSchedulable, bounds.OutOfBounds) as exc:
            self.add_error("jobs", str(exc))
        data["jobs"] = jobs
        return data


class NodeFilterForm(forms.Form):
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), required=False, empty_label="all clusters")
    policy = forms.ChoiceField(required=False, choices=[("", "any policy"), *TOPOLOGY_POLICY_CHOICES],
                               label="topology policy")
    min_free = forms.IntegerField(required=False, min_value=0, max_value=1_000_000, label="free CPUs ≥")
    min_numa_free = forms.IntegerField(required=False, min_value=0, max_value=1_000_000,
                                       label="free CPUs on one NUMA node ≥")


class SnapshotImportForm(forms.Form):
    """A kubectl cluster snapshot into a cluster (created when the name is new). Sent with a file it is
    the first step (a dry run, shown as a preview); sent with the preview's `upload` token it imports."""

    cluster = forms.SlugField(max_length=100, help_text="an existing cluster to update, or a new name")
    file = forms.FileField(label="snapshot", required=False, allow_empty_file=True,
                           help_text="kubectl get nodes,noderesourcetopologies,numatopologies,"
                                     "pods,jobs.batch.volcano.sh,podgroups -A -o yaml (or -o json)")
    prune = forms.BooleanField(required=False, label="remove nodes the snapshot no longer lists",
                               help_text="without it they are reported and kept")
    allow_empty = forms.BooleanField(required=False, label="allow a snapshot without nodes",
                                     help_text="refused otherwise (a failed kubectl get leaves an empty file)")
    upload = forms.CharField(required=False, widget=forms.HiddenInput, max_length=64)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not data.get("file") and not data.get("upload"):
            self.add_error("file", "choose a snapshot file")
        return data


class StateCheckForm(forms.Form):
    """A node's kubelet state files, checked against the engine's kubelet model."""

    cpu_state = forms.FileField(label="cpu_manager_state", help_text="/var/lib/kubelet/cpu_manager_state")
    memory_state = forms.FileField(label="memory_manager_state", required=False,
                                   help_text="/var/lib/kubelet/memory_manager_state (optional)")
    pods = forms.FileField(label="pods", required=False,
                           help_text="the node's pods in admission order, kubectl get pods -o yaml (optional)")
    kubelet_config = forms.FileField(label="planned config.yaml", required=False,
                                     help_text="a KubeletConfiguration you plan to roll out: would the kubelet start "
                                               "with it? (optional; default: this node's settings)")
    cpu_manager_policy = forms.ChoiceField(label="planned CPU Manager policy", required=False,
                                           choices=[("", "(unchanged)"), *CPU_MANAGER_CHOICES])
    reserved_cpus = forms.CharField(label="planned reservedSystemCPUs", required=False,
                                    help_text="e.g. 0-1 (optional; '-' for none)")
    topology_manager_policy = forms.ChoiceField(label="planned Topology Manager policy", required=False,
                                                choices=[("", "(unchanged)"), *TOPOLOGY_POLICY_CHOICES])
    topology_manager_scope = forms.ChoiceField(label="planned Topology Manager scope", required=False,
                                               choices=[("", "(unchanged)"), *TOPOLOGY_SCOPE_CHOICES])
    memory_manager_policy = forms.ChoiceField(label="planned Memory Manager policy", required=False,
                                              choices=[("", "(unchanged)"), *MEMORY_MANAGER_CHOICES])
    reserved_memory = FormJSONField(label="planned reserved memory", required=False,
                                      help_text='per NUMA node, bytes: {"0": {"memory": 1073741824}} (optional)')

    PLANNED = ("cpu_manager_policy", "reserved_cpus", "topology_manager_policy", "topology_manager_scope",
               "memory_manager_policy", "reserved_memory")

    def planned_settings(self) -> dict:
        """The settings the form changes (empty fields leave them as they are; none before validation)."""
        out = {}
        for name in self.PLANNED:
            value = getattr(self, "cleaned_data", {}).get(name)
            if value in ("", None):
                continue
            out[name] = None if value == "-" else value
        return out


class KubeletConfigForm(forms.Form):
    """A node's KubeletConfiguration (/var/lib/kubelet/config.yaml) to take its settings from."""

    file = forms.FileField(label="config.yaml", help_text="/var/lib/kubelet/config.yaml (kind: KubeletConfiguration)")


class HintTableForm(forms.Form):
    """The hint table's query: which rows (show, reason), their order, page and size, one row per node
    or per class. A value out of range falls back to its default (a page never fails on a stale link)."""

    SHOW = [("all", "all"), ("failed", "failed"), ("passed", "passed")]

    show = forms.ChoiceField(choices=SHOW, required=False)
    reason = forms.CharField(required=False, max_length=2000)
    sort = forms.ChoiceField(choices=[(k, k) for k in ("outcome", "score", "name", "reason", "count")], required=False)
    size = forms.IntegerField(min_value=10, max_value=500, required=False)
    expand = forms.BooleanField(required=False)
    page = forms.IntegerField(min_value=1, required=False)
    pod = forms.IntegerField(min_value=0, required=False, help_text="the pod shown on the session page")
    pods_page = forms.IntegerField(min_value=1, required=False)

    DEFAULTS = {"show": "all", "reason": "", "sort": "outcome", "size": 50, "expand": False, "page": 1, "pod": None,
                "pods_page": 1}

    def values(self) -> dict:
        """Cleaned values, each field that is absent or invalid replaced by its default."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return {name: default if name in self.errors or data.get(name) in (None, "") else data[name]
                for name, default in self.DEFAULTS.items()}


class ClusterMapForm(forms.Form):
    """What the cluster map colours its nodes by (numaweb.pages.cluster_map.MEASURES)."""

    measure = forms.ChoiceField(choices=[], initial="best", label="colour by")
    size = forms.IntegerField(min_value=1, max_value=4096, initial=4, required=False,
                              label="block size (CPUs)", help_text="for free single-NUMA blocks")
    session = forms.ModelChoiceField(queryset=SchedulingSession.objects.none(), required=False,
                                     empty_label="choose a session", help_text="for TopologyAffinityErrors")

    def __init__(self, cluster: Cluster, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["measure"]).choices = list(MEASURES.items())
        sessions = SchedulingSession.objects.filter(cluster=cluster).order_by("-id")
        cast(forms.ModelChoiceField, self.fields["session"]).queryset = sessions

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("measure") == "errors" and not data.get("session"):
            self.add_error("session", "choose the session whose TopologyAffinityErrors to show")
        if data.get("measure") == "blocks" and not data.get("size"):
            self.add_error("size", "give the block size in CPUs")
        return data
