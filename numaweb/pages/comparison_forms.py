"""The comparison pages' forms: a comparison (cluster, jobs, a few variant rows, the pod shape for headroom) and the
dashboard's headroom box. The engine validates (Variant, Shape); its messages land on the field."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from numaweb.comparisons import services
from numaweb.inventory.models import TOPOLOGY_POLICY_CHOICES, TOPOLOGY_SCOPE_CHOICES, Cluster
from numaweb.jobs.forms import ClusterJobsMixin
from scheduler_core.errors import EngineError
from scheduler_core.model.kubelet_config import CPU_OPTIONS
from scheduler_core.scheduler.compare import CPU_BIND_POLICIES, KOORDINATOR_STRATEGIES, STRATEGIES, Shape, Variant
from scheduler_core.scheduler.profiles import PROFILES

PROFILE_CHOICES = [(p, p) for p in PROFILES]
KEEP = ("", "each node's own")
#: a row per engine profile, each chosen at first, and one to spare (the API takes at most 8 variants)
DEFAULT_PROFILES = tuple(PROFILES)
VARIANT_ROWS = min(len(DEFAULT_PROFILES) + 1, 8)


class ShapeMixin(forms.Form):
    """A pod shape: the engine parses the quantities (Shape.parse) and says which field is wrong."""

    cpu = forms.CharField(max_length=32, required=False, label="CPU", help_text='e.g. "4" or "500m"',
                          widget=forms.TextInput(attrs={"placeholder": "4", "inputmode": "decimal"}))
    memory = forms.CharField(max_length=32, required=False, help_text='e.g. "8Gi"',
                             widget=forms.TextInput(attrs={"placeholder": "8Gi"}))
    devices = forms.CharField(max_length=500, required=False, help_text="resource=count, comma separated",
                              widget=forms.TextInput(attrs={"placeholder": "nvidia.com/gpu=1"}))
    policy = forms.ChoiceField(choices=[("", "none"), *TOPOLOGY_POLICY_CHOICES], required=False,
                               label="task policy", help_text="Volcano's topology policy on the pod's task")
    shape_required = True

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not data.get("cpu") and not self.shape_required:
            data["shape"] = None
            return data
        try:
            data["shape"] = Shape.parse(data.get("cpu"), data.get("memory"), data.get("devices") or None,
                                        data.get("policy") or None)
        except EngineError as exc:
            field, sep, reason = str(exc).partition(": ")
            if sep and field in ("cpu", "memory", "devices", "policy"):
                self.add_error(field, reason)
            else:
                self.add_error("cpu", str(exc))
        return data


class HeadroomForm(ShapeMixin):
    """The dashboard box: how many more pods of this shape fit, per node."""

    profile = forms.ChoiceField(choices=PROFILE_CHOICES, initial="aligned")
    prefix = "hr"


class VariantForm(forms.Form):
    """One variant row; a row without a profile is skipped."""

    profile = forms.ChoiceField(choices=[("", "—"), *PROFILE_CHOICES], required=False)
    topology_manager_policy = forms.ChoiceField(choices=[KEEP, *TOPOLOGY_POLICY_CHOICES], required=False,
                                                label="topology policy")
    topology_manager_scope = forms.ChoiceField(choices=[KEEP, *TOPOLOGY_SCOPE_CHOICES], required=False,
                                               label="scope")
    cpu_manager_options = forms.MultipleChoiceField(choices=[(o, o) for o in CPU_OPTIONS], required=False,
                                                    widget=forms.CheckboxSelectMultiple, label="CPU options",
                                                    help_text="ticked: replace every node's options")
    replace_cpu_options = forms.BooleanField(required=False, label="set CPU options",
                                             help_text="override each node's CPU Manager options with the ticked ones")
    weight = forms.IntegerField(min_value=0, max_value=100, initial=1, required=False, label="plugin weight")
    distance_tie_break = forms.BooleanField(required=False, label="closest NUMA tie-break (aligned)")
    strategy = forms.ChoiceField(choices=[("", "default (LeastAllocated)"), *((s, s) for s in STRATEGIES)],
                                 required=False, label="scoring strategy (nrt, koordinator)")
    numa_strategy = forms.ChoiceField(choices=[("", "default (LeastAllocated)"),
                                               *((s, s) for s in KOORDINATOR_STRATEGIES)],
                                      required=False, label="NUMA scoring strategy (koordinator)")
    cpu_bind_policy = forms.ChoiceField(choices=[("", "default (FullPCPUs)"), *((p, p) for p in CPU_BIND_POLICIES)],
                                        required=False, label="default CPU bind policy (koordinator)")
    ignore_list = forms.CharField(max_length=500, required=False, label="ignored resources (kai)",
                                  help_text="resource names, comma separated",
                                  widget=forms.TextInput(attrs={"placeholder": "nvidia.com/gpu"}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The controls the row shows without a label of their own are named for their row ("variant 2:
        scope"): the table's header names the column for the eye, a screen reader (and axe) needs each named.
        The CPU options (each ticked box) and the `replace` box carry visible labels."""
        super().__init__(*args, **kwargs)
        row = int(str(self.prefix).rsplit("-", 1)[-1]) + 1
        for name in ("profile", "topology_manager_policy", "topology_manager_scope", "weight", "distance_tie_break",
                     "strategy", "numa_strategy", "cpu_bind_policy", "ignore_list"):
            self.fields[name].widget.attrs["aria-label"] = f"variant {row}: {self.fields[name].label}"

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not data.get("profile"):
            data["variant"] = None
            return data
        settings: dict[str, object] = {
            "profile": data["profile"], "topology_manager_policy": data.get("topology_manager_policy") or None,
            "topology_manager_scope": data.get("topology_manager_scope") or None,
            "weight": 1 if data.get("weight") is None else data["weight"],
            "distance_tie_break": bool(data.get("distance_tie_break")), "strategy": data.get("strategy") or None,
            "numa_strategy": data.get("numa_strategy") or None, "cpu_bind_policy": data.get("cpu_bind_policy") or None,
            "ignore_list": [n.strip() for n in (data.get("ignore_list") or "").split(",") if n.strip()] or None}
        if data.get("replace_cpu_options") or data.get("cpu_manager_options"):
            settings["cpu_manager_options"] = {o: "true" for o in data.get("cpu_manager_options") or ()}
        try:
            data["variant"] = Variant.from_dict(settings)
        except EngineError as exc:
            field, sep, reason = str(exc).partition(": ")
            self.add_error(field if sep and field in self.fields else None, reason if sep else str(exc))
        return data


VariantFormSet = forms.formset_factory(VariantForm, extra=0, min_num=VARIANT_ROWS, max_num=VARIANT_ROWS)


class ComparisonForm(ClusterJobsMixin, ShapeMixin):
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), widget=forms.HiddenInput)
    shape_required = False
    prefix = "cmp"  # shares the jobs page with the session and job forms: distinct names and ids
    field_order = ["cluster", "scope", "jobs", "cpu", "memory", "devices", "policy"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("cpu", "memory", "devices", "policy"):
            self.fields[name].help_text = f"headroom shape: {self.fields[name].help_text}".rstrip(": ")
        self.scope_jobs()


def variant_formset(data: QueryDict | None = None) -> forms.BaseFormSet:
    initial = [{"profile": p, "weight": 1} for p in DEFAULT_PROFILES] + [{"weight": 1}]
    return VariantFormSet(data, prefix="v", initial=initial)


def chosen_variants(form: ComparisonForm, formset: forms.BaseFormSet) -> list[Variant] | None:
    """The variants of a valid form and formset, checked against the cluster's nodes (the error goes
    on the form when one does not fit); None when something is invalid."""
    if not (form.is_valid() and formset.is_valid()):
        return None
    variants = [f.cleaned_data["variant"] for f in formset if f.cleaned_data.get("variant")]
    if not variants:
        form.add_error(None, "choose a profile for at least one variant")
        return None
    try:
        services.parse_variants(form.cleaned_data["cluster"], [v.to_dict() for v in variants])
    except services.ComparisonError as exc:
        form.add_error(None, str(exc))
        return None
    return variants
