"""DRF serializers. Validation is the engine's: its EngineError messages become field errors."""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from datetime import tzinfo
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.settings import api_settings
from rest_framework.utils import html

from numaweb import limits
from numaweb.api import rawjson
from numaweb.api.caps import CappedLists
from numaweb.inventory import services as inventory
from numaweb.inventory.agent import agent_status
from numaweb.inventory.checks import FILE_UPLOAD_LIMIT
from numaweb.inventory.models import (
    CPU_MANAGER_CHOICES,
    MEMORY_MANAGER_CHOICES,
    TOPOLOGY_POLICY_CHOICES,
    TOPOLOGY_SCOPE_CHOICES,
    Allocation,
    Cluster,
    Node,
    NodeReport,
    printable,
)
from numaweb.jobs import bounds, submission
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job, Task
from numaweb.links import id_link
from numaweb.scheduling.models import Placement, PodStatus, SchedulingSession
from scheduler_core.errors import EngineError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.kubelet_config import CPUOptions, KubeletConfig, TopologyOptions
from scheduler_core.model.topology import Topology
from scheduler_core.scheduler.explain import Outcome

_M = TypeVar("_M", bound=models.Model)

JSON_OBJECT = {"type": "object", "additionalProperties": True}


class TextOnly(serializers.CharField):
    """Text only: DRF's text fields turn a JSON number or boolean into text, where the schema says string."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(TextOnly, serializers.CharField):
    pass


class StrictSlugField(TextOnly, serializers.SlugField):
    pass


class StrictBooleanField(serializers.BooleanField):
    """true or false, as the schema's boolean: a JSON boolean, or in a form its text ("true"/"false", any case).
    DRF's field also takes 1, 0, "on", "yes", a JSON string and an empty form field (false)."""

    def get_value(self, dictionary: Any) -> Any:
        if not html.is_html_input(dictionary):
            return super().get_value(dictionary)
        if dictionary.get(self.field_name) == "":
            return ""  # refused below, where DRF would read an unticked HTML checkbox
        value = super().get_value(dictionary)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        return value

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)


class ModelSerializer(serializers.ModelSerializer[_M]):
    """A model serializer whose text fields take text only, and booleans true or false only."""

    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping,
                                models.CharField: StrictCharField, models.TextField: StrictCharField,
                                models.SlugField: StrictSlugField, models.BooleanField: StrictBooleanField}


class CountField(serializers.IntegerField):
    """A count the list queryset annotates; an object fresh from a create or an update is counted here, so
    the field is in every answer, as the schema says."""

    def __init__(self, relation: str, **kwargs: Any) -> None:
        self.relation = relation
        super().__init__(read_only=True, **kwargs)

    def get_attribute(self, instance: Any) -> int:
        value: int | None = getattr(instance, self.field_name, None) if self.field_name else None
        if value is None:
            count: int = getattr(instance, self.relation).count()
            return count
        return value


class ClusterSerializer(ModelSerializer[Cluster]):
    node_count = CountField("nodes")
    url = serializers.HyperlinkedIdentityField(view_name="api:cluster-detail")

    class Meta:
        model = Cluster
        fields = ["id", "url", "name", "description", "created_at", "node_count"]

    def save(self, **kwargs: Any) -> Cluster:
        """A name taken by a concurrent create (past the uniqueness check) is a 400 on `name`, not a 500."""
        try:
            with transaction.atomic():
                return super().save(**kwargs)
        except IntegrityError as exc:
            name = self.validated_data.get("name")
            if name is not None and Cluster.objects.filter(name=name).exists():
                raise serializers.ValidationError({"name": ["cluster with this name already exists."]}) from exc
            raise


@extend_schema_field(JSON_OBJECT)
class ObjectField(limits.JSONField):
    """A JSON object (dict); other JSON values are refused with a clear message."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}, "nullable": True}
#: a task's pod template as the API takes and returns it (other keys are ignored, as before)
POD_TEMPLATE = {
    "type": "object", "additionalProperties": True,
    "properties": {
        "labels": {**_STRINGS, "description": "the pod's labels (Koordinator's koordinator.sh/qosClass, "
                                              "koordinator.sh/priority-class, ...)"},
        "annotations": {**_STRINGS, "description": "the pod's annotations (scheduling.koordinator.sh/resource-spec "
                                                   "and numa-topology-spec, volcano.sh/numa-topology-policy, ...)"},
        "priority": {"type": "integer", "nullable": True, "minimum": bounds.INT32[0], "maximum": bounds.INT32[1],
                     "description": "the pod's spec.priority (Koordinator's priority class reads it); not the job's"},
    },
}


@extend_schema_field(POD_TEMPLATE)
class PodTemplateField(ObjectField):
    """A task's pod template: containers, init containers, its labels, annotations and pod priority."""


class StoredObjectField(rawjson.StoredText, ObjectField):
    """An ObjectField served from the stored text when a list read it as text (numaweb.api.rawjson)."""


def _engine_error(exc: Exception) -> str:
    return inventory.topology_error(exc)


class Conflict(APIException):
    """409: what was asked for is already held; the body names the CPUs and their holders."""

    status_code = 409
    default_code = "conflict"

    def __init__(self, exc: inventory.AllocationConflict) -> None:
        super().__init__(str(exc))
        # the holders as they are (ints, objects): DRF's ErrorDetail would turn every value into text
        self.detail = {"detail": str(exc), "cpus": exc.cpus, "holders": exc.holders}  # type: ignore[dict-item]


class NodeSerializer(ModelSerializer[Node]):
    """A node: the topology is the engine's JSON; kubelet settings are checked by the engine."""

    cluster = serializers.PrimaryKeyRelatedField(queryset=Cluster.objects.all())
    topology = StoredObjectField(help_text="the engine's topology JSON (see scheduler_core.Topology.to_dict)")
    cpu_manager_policy = serializers.ChoiceField(CPU_MANAGER_CHOICES, default="static")
    topology_manager_policy = serializers.ChoiceField(TOPOLOGY_POLICY_CHOICES, default="none")
    topology_manager_scope = serializers.ChoiceField(TOPOLOGY_SCOPE_CHOICES, default="container")
    memory_manager_policy = serializers.ChoiceField(MEMORY_MANAGER_CHOICES, default="None")
    cpu_manager_options = ObjectField(required=False)
    topology_manager_options = ObjectField(required=False)
    reserved_memory = ObjectField(required=False)
    allocation_count = CountField("allocations")
    agent = serializers.SerializerMethodField(help_text=(
        "the node agent's last report (null: no agent reports this node): reported_at, received_at, changed_at, "
        "stale (silent longer than NUMAWEB_AGENT_STALE_SECONDS), disagreements, the state check (verdict, "
        "match, reasons, the containers where the model and the kubelet disagree) and every PCI function read "
        "(pci_devices: bus_id, class, vendor, device, numa)"))

    class Meta:
        model = Node
        fields = ["id", "cluster", "name", "topology", "cpu_manager_policy", "cpu_manager_options",
                  "reserved_cpus", "reserved_cpu_milli", "topology_manager_policy", "topology_manager_scope",
                  "topology_manager_options", "memory_manager_policy", "reserved_memory", "numatopology",
                  "source_format", "imported_at", "num_cpus", "num_numa_nodes", "num_sockets", "fingerprint",
                  "generation", "updated_at", "allocation_count", "agent"]
        read_only_fields = ["source_format", "imported_at", "num_cpus", "num_numa_nodes", "num_sockets",
                            "fingerprint", "generation", "updated_at"]
        validators: list = []  # the (cluster, name) uniqueness is checked in validate() with a clear message

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": {}})
    def get_agent(self, node: Node) -> dict[str, Any] | None:
        try:
            report = node.report
        except NodeReport.DoesNotExist:
            return None
        return agent_status(report)

    def validate_topology(self, value: dict) -> Topology:
        try:
            return Topology.from_dict(value)
        except (EngineError, TypeError, KeyError, AttributeError) as exc:
            raise serializers.ValidationError(_engine_error(exc)) from exc

    def validate_cpu_manager_options(self, value: dict) -> dict:
        try:
            return CPUOptions.parse(value).to_dict()
        except EngineError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def validate_topology_manager_options(self, value: dict) -> dict:
        try:
            return TopologyOptions.parse(value).to_dict()
        except EngineError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def validate_reserved_cpus(self, value: str) -> str:
        try:
            return str(CPUSet.parse(value or ""))
        except EngineError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def validate(self, attrs: dict) -> dict:
        instance: Node | None = self.instance
        node = copy.copy(instance) if instance is not None else Node()  # a copy of the stored row, to update it
        topology = attrs.pop("topology", None)
        for key, value in attrs.items():
            setattr(node, key, value)
        cluster = attrs.get("cluster") or (instance.cluster if instance else None)
        if instance is not None and cluster is not None:
            try:
                inventory.check_move(instance, cluster)
            except inventory.NodeMoveRefused as exc:
                raise serializers.ValidationError({"cluster": [str(exc)]}) from exc
        name = attrs.get("name") or (instance.name if instance else None)
        clash = Node.objects.filter(cluster=cluster, name=name)
        if instance is not None:
            clash = clash.exclude(pk=instance.pk)
        if clash.exists():
            raise serializers.ValidationError({"name": [f"cluster {cluster} already has a node named {name!r}"]})
        try:
            KubeletConfig.from_dict(inventory.kubelet_dict(node))
        except EngineError as exc:
            raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from exc
        if topology is not None:
            inventory.set_topology(node, topology, "json")
        try:
            inventory.to_engine(node, instance.allocations.all() if instance else ())
        except EngineError as exc:
            raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from exc
        attrs["_node"] = node
        return attrs

    def create(self, validated_data: dict) -> Node:
        node: Node = validated_data["_node"]
        try:
            with transaction.atomic():
                node.save()
        except IntegrityError as exc:
            raise serializers.ValidationError({"name": [str(exc)]}) from exc
        return node

    def update(self, instance: Node, validated_data: dict) -> Node:
        """Saved with the node held, the move rule checked again there (an allocation may have landed)."""
        node: Node = validated_data["_node"]
        with transaction.atomic():
            current = inventory.hold_nodes([instance.pk]).get(instance.pk)
            if current is not None and node.cluster_id != current.cluster_id:
                try:
                    inventory.check_move(current, node.cluster)
                except inventory.NodeMoveRefused as exc:
                    raise serializers.ValidationError({"cluster": [str(exc)]}) from exc
            node.save()  # its generation advances
        return node


class NodeUploadResultSerializer(NodeSerializer):
    """The node an upload created or replaced, with what the import says about its pods."""

    notes = serializers.ListField(child=serializers.CharField(), source="import_notes", read_only=True,
                                  help_text="how the file's pods were named and linked to their jobs")

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "notes"]


class NodeUploadSerializer(serializers.Serializer):
    """Create or replace a node from a topology file in any format the engine reads."""

    cluster = serializers.PrimaryKeyRelatedField(queryset=Cluster.objects.all())
    name = serializers.CharField(max_length=253, validators=[printable])
    file = serializers.FileField(help_text="hwloc XML, lscpu, numactl, sysfs tarball, NRT/Numatopology, JSON…")
    format = serializers.CharField(required=False, allow_blank=True, help_text="empty: detected from the content")
    cpu_manager_policy = serializers.ChoiceField(CPU_MANAGER_CHOICES, required=False)
    topology_manager_policy = serializers.ChoiceField(TOPOLOGY_POLICY_CHOICES, required=False)
    topology_manager_scope = serializers.ChoiceField(TOPOLOGY_SCOPE_CHOICES, required=False)

    def validate(self, attrs: dict) -> dict:
        """The file read by the engine (its errors on `file`); nothing is written until `save`."""
        try:
            attrs["_loaded"] = inventory.load_topology_data(attrs["file"].read(), attrs.get("format") or None)
        except (EngineError, UnicodeDecodeError) as exc:
            raise serializers.ValidationError({"file": [_engine_error(exc)]}) from exc
        return attrs

    def create(self, validated_data: dict) -> Node:
        """The node created or replaced in one transaction; settings or allocations that do not fit are a
        400 on `file` (a 409 for a pod held elsewhere) and leave everything as it was."""
        kubelet_fields = {k: validated_data[k] for k in ("cpu_manager_policy", "topology_manager_policy",
                                                         "topology_manager_scope") if k in validated_data}
        try:
            return inventory.import_loaded(validated_data["cluster"], validated_data["name"],
                                           validated_data["_loaded"], kubelet_fields)
        except EngineError as exc:
            raise serializers.ValidationError({"file": [_engine_error(exc)]}) from exc
        except inventory.AllocationConflict as exc:
            raise Conflict(exc) from exc


def _upload_bytes(upload: UploadedFile, field: str, limit: int | None = None) -> bytes:
    """An uploaded file's content, refused above the importers' size limit before it is read."""

    limit = limit or FILE_UPLOAD_LIMIT
    if upload.size is None:  # Django's upload handlers always set it
        raise serializers.ValidationError({field: ["the upload's size is unknown"]})
    if upload.size > limit:
        raise serializers.ValidationError({field: [f"{upload.size} bytes is larger than the "
                                                   f"{limit >> 20} MiB limit"]})
    data: bytes = upload.read()
    return data


class SnapshotUploadSerializer(serializers.Serializer):
    """A kubectl cluster snapshot (YAML or JSON) for `POST /api/clusters/<id>/import/`."""

    file = serializers.FileField(allow_empty_file=True,  # refused by the importer, saying why (allow_empty)
                                 help_text="kubectl get nodes,noderesourcetopologies,numatopologies,pods,"
                                           "jobs.batch.volcano.sh,podgroups -A -o yaml (or -o json)")
    dry_run = StrictBooleanField(required=False, default=False,
                                       help_text="report what would change and change nothing (also ?dry_run=true)")
    prune = StrictBooleanField(required=False, default=False,
                                     help_text="flag the cluster's nodes the snapshot no longer lists as removed; "
                                               "without it they are only reported (also ?prune=true)")
    allow_empty = StrictBooleanField(required=False, default=False,
                                           help_text="import a snapshot that lists no node; refused otherwise "
                                                     "(also ?allow_empty=true)")


class StateCheckUploadSerializer(serializers.Serializer):
    """A node's kubelet state files for `POST /api/nodes/<id>/check-state/`."""

    cpu_state = serializers.FileField(help_text="/var/lib/kubelet/cpu_manager_state")
    memory_state = serializers.FileField(required=False, help_text="/var/lib/kubelet/memory_manager_state")
    pods = serializers.FileField(required=False, help_text="the node's pods in admission order (kubectl -o yaml)")
    kubelet_config = serializers.FileField(required=False,
                                           help_text="a planned /var/lib/kubelet/config.yaml (KubeletConfiguration): "
                                                     "would the kubelet start with it? (default: the node's settings)")
    planned_settings = limits.JSONField(
        required=False, binary=True,
        help_text='planned node settings by their API names, over the file\'s or the node\'s: e.g. '
                  '{"reserved_cpus": "0-1", "cpu_manager_policy": "static"}')


class DraReportSerializer(serializers.Serializer):
    devices = serializers.IntegerField(help_text="devices the ResourceSlices publish")
    claims = serializers.IntegerField(help_text="ResourceClaims")
    pods = serializers.IntegerField(help_text="pods using DRA devices, their alignment checked")
    misaligned = serializers.ListField(child=serializers.CharField(),
                                       help_text="pods whose devices are off their pinned CPUs' or memory's NUMA nodes")
    nodes_changed = serializers.ListField(child=serializers.CharField(), help_text="nodes whose devices changed")
    changed = serializers.BooleanField()


class ImportReportSerializer(serializers.Serializer):
    changed = serializers.BooleanField()
    dry_run = serializers.BooleanField(help_text="true: a preview, nothing was changed")
    pruned = serializers.BooleanField(help_text="nodes the snapshot no longer lists were flagged removed")
    nodes_added = serializers.ListField(child=serializers.CharField())
    nodes_updated = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
    nodes_unchanged = serializers.IntegerField()
    nodes_removed = serializers.ListField(child=serializers.CharField())
    nodes_missing = serializers.ListField(child=serializers.CharField(),
                                          help_text="not in the snapshot and kept (no prune)")
    nodes_returned = serializers.ListField(child=serializers.CharField())
    allocations_replayed = serializers.IntegerField()
    allocations_dropped = serializers.IntegerField()
    allocations_changed = serializers.ListField(child=serializers.CharField())
    scheduled_dropped = serializers.ListField(child=serializers.CharField())
    disagreements = serializers.ListField(child=serializers.CharField())
    jobs_added = serializers.ListField(child=serializers.CharField())
    jobs_updated = serializers.ListField(child=serializers.CharField())
    jobs_kept = serializers.ListField(child=serializers.CharField())
    dra = DraReportSerializer(allow_null=True, help_text="the Dynamic Resource Allocation objects kept")
    notes = serializers.ListField(child=serializers.CharField())


class ContainerCheckSerializer(serializers.Serializer):
    pod = serializers.CharField()
    container = serializers.CharField()
    predicted_cpus = serializers.CharField()
    actual_cpus = serializers.CharField()
    predicted_memory = serializers.DictField(allow_null=True)
    actual_memory = serializers.DictField(allow_null=True)
    match = serializers.BooleanField()
    error = serializers.CharField()
    why = serializers.CharField()


class RefusalSerializer(serializers.Serializer):
    manager = serializers.CharField(help_text="Topology Manager, CPU Manager or Memory Manager")
    stage = serializers.CharField(help_text="configuration or checkpoint")
    message = serializers.CharField(help_text="the kubelet's text as it exits with it")
    cause = serializers.CharField(help_text="the manager's own error inside it")
    file = serializers.CharField(allow_null=True, help_text="the checkpoint file to delete (after draining)")
    action = serializers.CharField(help_text="what the operator must do before the kubelet starts")


class StartVerdictSerializer(serializers.Serializer):
    starts = serializers.BooleanField()
    summary = serializers.CharField()
    refusal = RefusalSerializer(allow_null=True)
    default_cpuset = serializers.CharField(allow_null=True, help_text="the shared pool the kubelet starts with")
    assignments = serializers.DictField(help_text="pod uid -> container -> exclusive CPUs")
    machine_state = serializers.DictField(allow_null=True)
    memory_assignments = serializers.DictField()
    pods_to_move = serializers.ListField(child=serializers.CharField(),
                                         help_text="pinned pods that leave the node when it is drained")
    checked = serializers.ListField(child=serializers.CharField())


class StateCheckSerializer(serializers.Serializer):
    node = serializers.CharField()
    match = serializers.BooleanField()
    verdict = serializers.CharField()
    mismatches = serializers.IntegerField()
    reasons = serializers.ListField(child=serializers.CharField())
    file_policy = serializers.CharField()
    order = serializers.CharField()
    actual_default_cpuset = serializers.CharField()
    predicted_default_cpuset = serializers.CharField()
    containers = ContainerCheckSerializer(many=True)
    start = StartVerdictSerializer(help_text="would a kubelet with the node's (or the planned) settings start")
    planned_changes = serializers.DictField(help_text="setting -> {node, planned} for a planned configuration")
    pods_on_node = serializers.ListField(child=serializers.CharField(),
                                        help_text="pods the inventory has on the node (a drain evicts them all)")


class KubeletConfigUploadSerializer(serializers.Serializer):
    """A KubeletConfiguration for `POST /api/nodes/<id>/kubelet-config/`."""

    file = serializers.FileField(help_text="/var/lib/kubelet/config.yaml (kind: KubeletConfiguration)")


class AllocationSerializer(ModelSerializer[Allocation]):
    """An allocation is written by `inventory.services.add_allocation`: checked and saved with its node
    held, so concurrent writers cannot both succeed; a conflict answers 409 naming CPUs and holders."""

    memory = ObjectField(required=False)
    devices = ObjectField(required=False)
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all())

    class Meta:
        model = Allocation
        fields = ["id", "cluster", "node", "job", "pod", "container", "cpus", "memory", "devices", "origin",
                  "session", "observed_at", "created_at"]
        read_only_fields = ["cluster", "job", "session", "observed_at", "created_at"]

    def validate_cpus(self, value: str) -> str:
        try:
            return str(CPUSet.parse(value or ""))
        except EngineError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def create(self, validated_data: dict) -> Allocation:
        node = validated_data.pop("node")
        try:
            return inventory.add_allocation(node, **validated_data)
        except inventory.AllocationConflict as exc:
            raise Conflict(exc) from exc
        except inventory.AllocationRefused as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        except EngineError as exc:
            raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from exc


class TaskSerializer(ModelSerializer[Task]):
    topology_policy = serializers.ChoiceField([("", "(none given)"), *TOPOLOGY_POLICY_CHOICES],
                                              required=False, allow_blank=True, default="")
    template = PodTemplateField(help_text='pod template: {"containers": [{"name": "main", "requests": {"cpu": "2", '
                                          '"memory": "4Gi"}, "limits": {...}}], "init_containers": [...], '
                                          '"labels": {"koordinator.sh/qosClass": "LSR"}, "annotations": {...}, '
                                          '"priority": 9000}')
    replicas = serializers.IntegerField(min_value=0, max_value=bounds.INT32[1], default=1,
                                        help_text="at most NUMAWEB_MAX_REPLICAS_PER_TASK (default 10,000)")

    class Meta:
        model = Task
        fields = ["name", "replicas", "topology_policy", "template"]

    def validate_template(self, value: dict) -> dict:
        try:
            job_services.pod_from_template("template", value)
        except (EngineError, TypeError, AttributeError) as exc:
            raise serializers.ValidationError(_engine_error(exc)) from exc
        return value  # still in Kubernetes quantities: the job is built from it once, in validate()


class SubmissionClusterField(serializers.PrimaryKeyRelatedField):
    """A job's cluster, looked up by the submission service (its refusal, word for word the jobs page's)."""

    def to_internal_value(self, data: Any) -> Cluster:
        try:
            return submission.cluster_by_id(data)
        except submission.Refused as exc:
            raise serializers.ValidationError(str(exc)) from exc


class JobSerializer(CappedLists, ModelSerializer[Job]):
    """A job: structured (name + tasks) or a `manifest` (Volcano Job YAML, Pod YAML, or their JSON), in
    one cluster (`cluster`; may be left out only while a single cluster exists)."""

    capped_lists = ("tasks",)

    cluster = SubmissionClusterField(
        queryset=Cluster.objects.all(), required=False,
        help_text="the cluster the job runs in; required when more than one cluster exists")
    tasks = TaskSerializer(many=True, required=False)
    manifest = serializers.CharField(required=False, allow_blank=True, max_length=submission.MAX_MANIFEST,
                                     error_messages={"max_length": submission.MANIFEST_TOO_LONG},
                                     help_text="Volcano Job (batch.volcano.sh/v1alpha1) or Pod YAML/JSON")
    name = serializers.CharField(max_length=253, required=False, help_text="a DNS-1123 subdomain")
    namespace = serializers.CharField(max_length=63, required=False, default="default",
                                      help_text="a DNS-1123 label")
    min_available = serializers.IntegerField(min_value=0, max_value=bounds.INT32[1], required=False, allow_null=True)
    priority = serializers.IntegerField(min_value=bounds.INT32[0], max_value=bounds.INT32[1], required=False,
                                        default=0)

    class Meta:
        model = Job
        fields = ["id", "cluster", "name", "namespace", "queue", "priority", "min_available", "status",
                  "source_format", "created_at", "tasks", "manifest"]
        read_only_fields = ["status", "source_format", "created_at"]
        validators: list = []

    def validate(self, attrs: dict) -> dict:
        """Checked by the submission service (as the jobs page's jobs are), its refusal on the field it names."""
        manifest = attrs.get("manifest") or ""
        job = None if manifest.strip() else {**attrs, "tasks": [dict(t) for t in attrs.get("tasks") or ()]}
        try:
            attrs["_submission"] = submission.prepare(manifest, job, attrs.get("cluster"))
        except submission.Refused as exc:
            raise _refused(exc) from exc
        attrs["cluster"] = attrs["_submission"].cluster
        return attrs

    def create(self, validated_data: dict) -> Job:
        try:
            return submission.submit(validated_data["_submission"])
        except submission.Refused as exc:  # a concurrent create of the same name won
            raise _refused(exc) from exc


_TASK_FIELDS = frozenset({"task", "replicas", "topology_policy", "cpu", "memory", "devices"})


def _refused(exc: submission.Refused) -> serializers.ValidationError:
    """A submission's refusal on the API's field: a task's fields are in `tasks`."""
    field = "tasks" if exc.field in _TASK_FIELDS else exc.field or api_settings.NON_FIELD_ERRORS_KEY
    return serializers.ValidationError({field: [str(exc)]})


class SessionSerializer(CappedLists, ModelSerializer[SchedulingSession]):
    capped_lists = ("jobs",)
    cluster = serializers.PrimaryKeyRelatedField(queryset=Cluster.objects.all())
    jobs = serializers.PrimaryKeyRelatedField(queryset=Job.objects.all(), many=True, required=False, write_only=True,
                                              help_text="jobs of the cluster to schedule; omitted: every job of the "
                                                        "cluster with a pod left to place")
    url = serializers.URLField(read_only=True)
    results_url = serializers.URLField(read_only=True)
    explanation_url = serializers.URLField(
        read_only=True, help_text="the whole explanation as one numaweb.session JSON document (streamed)")

    class Meta:
        model = SchedulingSession
        fields = ["id", "url", "results_url", "explanation_url", "cluster", "jobs", "job_count", "profile", "dry_run",
                  "status", "progress_done", "progress_total", "attempts", "runs", "created_at", "started_at",
                  "heartbeat_at", "worker", "finished_at", "engine_ms", "commit_ms", "pods_total", "pods_placed",
                  "pods_admitted", "jobs_total", "jobs_placed", "nodes_total", "error", "weight", "room_check",
                  "counts", "timings"]
        read_only_fields = [f for f in fields if f not in ("cluster", "jobs", "profile", "dry_run")]

    def validate(self, attrs: dict) -> dict:
        jobs = attrs.get("jobs")
        if jobs:
            try:
                job_services.check_schedulable(jobs, attrs["cluster"])
            except (job_services.NotSchedulable, bounds.OutOfBounds) as exc:
                raise serializers.ValidationError({"jobs": [str(exc)]}) from exc
        return attrs

    def to_representation(self, obj: SchedulingSession) -> dict[str, Any]:
        """What DRF's generic path writes (a test holds the two equal), built without its per-field
        machinery: building the fields and calling them, not the database, was most of the cost of a
        page of sessions."""
        return self.represent(_session_output().read(obj))

    def represent(self, values: Sequence) -> dict[str, Any]:
        """A session's output from the values of `session_columns()` in order (a list reads them with
        `values_list`, without building model instances)."""
        out = _session_output()
        values = list(values)
        zone = self._zone
        for i in out.times:
            value = values[i]
            if value is not None:  # DRF's ISO 8601 in the current time zone, UTC written as Z
                value = value.astimezone(zone).isoformat()
                values[i] = value[:-6] + "Z" if value.endswith("+00:00") else value
        urls = self._urls
        for i in out.links:
            values[i] = urls[out.names[i]].format(pk=values[i])
        return dict(zip(out.names, values, strict=True))

    @functools.cached_property
    def _zone(self) -> tzinfo:
        return timezone.get_current_timezone()

    @functools.cached_property
    def _urls(self) -> dict[str, str]:
        """URL templates ({pk} in place of the id), absolute as DRF's `reverse` makes them when there is a
        request: built once per serializer from paths reversed once per process."""
        request = self.context.get("request")
        origin = request.build_absolute_uri("/")[:-1] if request is not None else ""
        urls = {}
        for field, view in (("url", "api:session-detail"), ("results_url", "api:session-results"),
                            ("explanation_url", "api:session-explanation")):
            head, tail = id_link(view)
            urls[field] = f"{origin}{head}{{pk}}{tail}"
        return urls


_SESSION_TIMES = frozenset({"created_at", "started_at", "heartbeat_at", "finished_at"})
_SESSION_LINKS = frozenset({"url", "results_url", "explanation_url"})


class _SessionOutput(NamedTuple):
    names: tuple[str, ...]  # the readable fields, in output order
    columns: tuple[str, ...]  # the model attribute (or values_list column) each is read from
    read: attrgetter  # a session → those attributes, in one call
    times: tuple[int, ...]  # positions of the times
    links: tuple[int, ...]  # positions of the links (read as the id)


@functools.cache
def _session_output() -> _SessionOutput:
    """How a session is written, from one serializer built once per process."""
    names = tuple(f.field_name for f in SessionSerializer()._readable_fields if f.field_name is not None)
    links = tuple(i for i, name in enumerate(names) if name in _SESSION_LINKS)
    columns = tuple("id" if i in links else "cluster_id" if name == "cluster" else name
                    for i, name in enumerate(names))
    times = tuple(i for i, name in enumerate(names) if name in _SESSION_TIMES)
    return _SessionOutput(names, columns, attrgetter(*columns), times, links)


def session_columns() -> tuple[str, ...]:
    """The columns `SessionSerializer.represent` takes, for `values_list`."""
    return _session_output().columns


class VerdictGroupSerializer(serializers.Serializer):
    """A class of nodes that gave a pod the same verdict (documentation; built by scheduling.results)."""

    verdict = serializers.IntegerField(help_text="the verdict's ref in the session")
    outcome = serializers.ChoiceField([o.value for o in Outcome], help_text="the engine's verdict for these nodes")
    reason = serializers.CharField(allow_null=True)
    score = serializers.IntegerField(allow_null=True)
    node_count = serializers.IntegerField()
    nodes = serializers.ListField(child=serializers.CharField(), help_text="the first names (explain_names)")


class PodRecordSerializer(serializers.Serializer):
    """A pod's record in the numaweb.session form (documentation: its status and verdicts; the record has the
    export's other keys too)."""

    status = serializers.ChoiceField(PodStatus.choices)
    outcomes = serializers.DictField(child=serializers.IntegerField(),
                                     help_text="nodes per outcome: " + ", ".join(o.value for o in Outcome))
    groups = VerdictGroupSerializer(many=True)


class PlacementSerializer(ModelSerializer[Placement]):
    """A pod's outcome; `detail` is its record in the numaweb.session form (the view passes the records
    of the page in the context as `records`, built with one query per table)."""

    node: serializers.PrimaryKeyRelatedField[Node] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="null when unplaced")
    memory = serializers.JSONField(read_only=True)
    devices = serializers.JSONField(read_only=True)
    reason = serializers.CharField(read_only=True)
    detail = serializers.SerializerMethodField()

    class Meta:
        model = Placement
        fields = ["index", "namespace", "job", "task", "pod", "status", "node", "node_name", "cpus", "memory",
                  "devices", "predicted", "admitted", "score", "reason", "detail"]

    @extend_schema_field(PodRecordSerializer)
    def get_detail(self, obj: Placement) -> dict:
        return (self.context.get("records") or {}).get(obj.index) or {}
