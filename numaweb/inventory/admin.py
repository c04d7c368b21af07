"""Admin for the inventory: kubelet settings as choices, topology and allocations checked by the
engine on save (its message becomes the form error)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from numaweb.access.admin import AuditedAdmin
from numaweb.jobs import services as jobs
from scheduler_core.errors import EngineError
from scheduler_core.model.topology import Topology

from . import services
from .models import Allocation, Cluster, Node

if TYPE_CHECKING:  # django-stubs' helper, a dev dependency only
    from django_stubs_ext import WithAnnotations


class _NodeCount(TypedDict):
    _nodes: int


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    list_display = ["name", "node_count", "created_at"]
    search_fields = ["name"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WithAnnotations[Cluster, _NodeCount]]:
        clusters: QuerySet[Cluster] = super().get_queryset(request)
        return clusters.annotate(_nodes=Count("nodes"))

    @admin.display(ordering="_nodes", description="nodes")
    def node_count(self, obj: WithAnnotations[Cluster, _NodeCount]) -> int:
        return obj._nodes


class NodeForm(forms.ModelForm):
    class Meta:
        model = Node
        fields = ["cluster", "name", "topology", "cpu_manager_policy", "cpu_manager_options", "reserved_cpus",
                  "reserved_cpu_milli", "topology_manager_policy", "topology_manager_scope",
                  "topology_manager_options", "memory_manager_policy", "reserved_memory", "numatopology"]

    def clean_topology(self) -> dict[str, Any]:
        data: dict[str, Any] = self.cleaned_data["topology"]
        try:
            self._engine_topology = Topology.from_dict(data)
        except (EngineError, TypeError, KeyError, AttributeError) as exc:
            raise forms.ValidationError(services.topology_error(exc)) from exc
        return data

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        node = self.instance
        if node.pk and cleaned.get("cluster") is not None:
            try:
                services.check_move(node, cleaned["cluster"])
            except services.NodeMoveRefused as exc:
                raise forms.ValidationError({"cluster": str(exc)}) from exc
        for name, value in cleaned.items():
            setattr(node, name, value)
        try:
            services.kubelet_of(node)
        except EngineError as exc:
            raise forms.ValidationError(str(exc)) from exc
        topology = getattr(self, "_engine_topology", None)
        if topology is not None:
            changed = "topology" in self.changed_data or not node.pk
            services.set_topology(node, topology, "json" if changed else (node.source_format or "json"),
                                  imported=changed)
        try:
            services.validate_node(node)
        except EngineError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return cleaned


@admin.register(Node)
class NodeAdmin(AuditedAdmin):
    form = NodeForm
    list_display = ["name", "cluster", "num_cpus", "num_numa_nodes", "cpu_manager_policy",
                    "topology_manager_policy", "topology_manager_scope", "source_format", "imported_at", "generation"]
    list_filter = ["cluster", "topology_manager_policy", "cpu_manager_policy", "source_format"]
    # 50 rows a page, not Django's 100: with thousands of rows the change list stays within a page's budget
    # (benchmarks/README.md, every page at 5,000 nodes)
    list_per_page = 50
    search_fields = ["name"]
    readonly_fields = ["source_format", "imported_at", "num_cpus", "num_numa_nodes", "num_sockets", "fingerprint",
                       "generation", "updated_at"]
    fieldsets = [
        (None, {"fields": ["cluster", "name", "numatopology"]}),
        ("Kubelet", {"fields": ["cpu_manager_policy", "cpu_manager_options", "reserved_cpus", "reserved_cpu_milli",
                                "topology_manager_policy", "topology_manager_scope", "topology_manager_options",
                                "memory_manager_policy", "reserved_memory"]}),
        ("Topology", {"fields": ["topology", "source_format", "imported_at", "num_cpus", "num_numa_nodes",
                                 "num_sockets", "fingerprint", "generation", "updated_at"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        """Without the topology documents, which the list never shows (a node's form reads its own)."""
        nodes: QuerySet[Node] = super().get_queryset(request)
        return nodes.defer("topology", "numatopology")


class AllocationForm(forms.ModelForm):
    """Checked with the node held: the admin runs the whole request in one transaction, so the row lock
    (PostgreSQL) or the IMMEDIATE transaction (SQLite) taken here lasts until the row is saved."""

    class Meta:
        model = Allocation
        fields = ["node", "pod", "container", "cpus", "memory", "devices", "origin"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors or not cleaned.get("node"):
            return cleaned
        Cluster.objects.select_for_update().filter(pk=cleaned["node"].cluster_id).first()  # as add_allocation
        node = services.hold_nodes([cleaned["node"].pk])[cleaned["node"].pk]
        row = Allocation(pk=self.instance.pk, node=node, cluster_id=node.cluster_id,
                         **{k: cleaned.get(k) for k in ("pod", "container", "cpus", "memory", "devices", "origin")})
        try:
            services.check_allocation(row, node)
        except services.AllocationRefused as exc:
            raise forms.ValidationError({exc.field: str(exc)}) from exc
        except (EngineError, services.AllocationConflict) as exc:
            raise forms.ValidationError(str(exc)) from exc
        return cleaned


@admin.register(Allocation)
class AllocationAdmin(AuditedAdmin):
    form = AllocationForm
    list_display = ["pod", "container", "node", "cpus", "origin", "job", "session", "created_at"]
    list_filter = ["origin", "node__cluster"]
    # 50 rows a page, not Django's 100: with thousands of rows the change list stays within a page's budget
    # (benchmarks/README.md, every page at 5,000 nodes)
    list_per_page = 50
    search_fields = ["pod", "node__name"]
    raw_id_fields = ["node"]
    readonly_fields = ["cluster", "job", "session", "created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Allocation]:
        """The list names each allocation's node, job and session: their rows without the large documents."""
        allocations: QuerySet[Allocation] = super().get_queryset(request)
        return allocations.select_related("node__cluster", "job", "session").defer(
            "node__topology", "node__numatopology", "job__manifest")

    def save_model(self, request: HttpRequest, obj: Allocation, form: forms.ModelForm, change: bool) -> None:

        before = Allocation.objects.filter(pk=obj.pk).values_list("job_id", flat=True).first() if change else None
        obj.cluster_id = obj.node.cluster_id
        obj.job = jobs.job_for_pod(obj.pod, obj.cluster_id)
        super().save_model(request, obj, form, change)
        jobs.refresh_status([before, obj.job_id])

    def delete_model(self, request: HttpRequest, obj: Allocation) -> None:
        services.remove_allocation(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Allocation]) -> None:
        for row in queryset:
            services.remove_allocation(row)
