"""The inventory: clusters, their nodes (topology as the engine serialises it + kubelet settings)
and who holds what on each node (allocations). Rows only; conversion to the engine lives in services."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F

from numaweb.access.history import audited
from scheduler_core.errors import EngineError
from scheduler_core.model.kubelet_config import (
    CPU_MANAGER_POLICIES,
    MEMORY_MANAGER_POLICIES,
    TOPOLOGY_POLICIES,
    TOPOLOGY_SCOPES,
)
from scheduler_core.model.names import check_printable


def printable(value: str) -> None:
    """The engine's rule for names (`scheduler_core.model.names`) as a field validator, so the admin and the
    API's model serializers refuse a node or pod name with a newline as the importers do."""
    try:
        check_printable(value, "the name")
    except EngineError as exc:
        raise ValidationError(str(exc), code="printable") from None


def _choices(values: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(v, v) for v in values]


CPU_MANAGER_CHOICES = _choices(CPU_MANAGER_POLICIES)
TOPOLOGY_POLICY_CHOICES = _choices(TOPOLOGY_POLICIES)
TOPOLOGY_SCOPE_CHOICES = _choices(TOPOLOGY_SCOPES)
MEMORY_MANAGER_CHOICES = _choices(MEMORY_MANAGER_POLICIES)


class Cluster(models.Model):
    SNAPSHOT = "kubectl-snapshot"

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=32, blank=True, default="",
                              help_text='"kubectl-snapshot" once a cluster snapshot was imported into it')
    imported_at = models.DateTimeField(null=True, blank=True, help_text="last snapshot import")
    last_import = models.JSONField(default=dict, blank=True, help_text="what the last snapshot import changed")
    disruption_budgets = models.JSONField(default=list, blank=True, help_text=(
        'the last snapshot\'s PodDisruptionBudgets: [{"name": "ns/name", "allowed": n, "pods": ["ns/pod", ...]}], '
        "which make room and the queue's advisor honour"))

    history = audited()  # the audit trail (numaweb.access.history)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NodeQuerySet(models.QuerySet["Node"]):
    def advance(self, **changes: Any) -> int:
        """Advance these nodes' generations, with `changes` in the same UPDATE: how a bulk writer (a session
        commit, a release, a snapshot's prune, an allocation written alone) says the nodes changed."""
        return self.update(generation=F("generation") + 1, **changes)


class Node(models.Model):
    """A node. `generation` grows on every change to the node or its allocations; a session commits
    only if the generation it read is still current (optimistic concurrency). This module is the rule's
    one owner: saving a stored node advances it (`save`), bulk writers call `Node.objects...advance()`,
    and a single allocation's write advances its node's (the signals below)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253, validators=[printable])
    topology = models.JSONField(help_text="The engine's topology JSON (kind numaweb.topology).")
    # kubelet settings, as the engine's KubeletConfig names them
    cpu_manager_policy = models.CharField(max_length=16, choices=CPU_MANAGER_CHOICES, default="static")
    cpu_manager_options = models.JSONField(default=dict, blank=True,
                                           help_text='cpuManagerPolicyOptions, e.g. {"full-pcpus-only": "true"}')
    reserved_cpus = models.CharField(max_length=1024, blank=True, default="",
                                     help_text="reservedSystemCPUs in Linux list format, e.g. 0,32")
    reserved_cpu_milli = models.PositiveIntegerField(default=0, help_text="kube+system reserved CPU, millicores")
    topology_manager_policy = models.CharField(max_length=32, choices=TOPOLOGY_POLICY_CHOICES, default="none")
    topology_manager_scope = models.CharField(max_length=16, choices=TOPOLOGY_SCOPE_CHOICES, default="container")
    topology_manager_options = models.JSONField(default=dict, blank=True,
                                                help_text='e.g. {"prefer-closest-numa-nodes": "true"}')
    memory_manager_policy = models.CharField(max_length=16, choices=MEMORY_MANAGER_CHOICES, default="None")
    reserved_memory = models.JSONField(default=dict, blank=True,
                                       help_text='per NUMA node: {"0": {"memory": 1073741824}}')
    numatopology = models.BooleanField(default=True, help_text="Volcano's resource exporter publishes this node")
    # freshness
    source_format = models.CharField(
        max_length=64, blank=True, default="json",
        help_text='the format that described the node; a snapshot node says "numatopo", "nrt" or "numatopo+nrt"')
    imported_at = models.DateTimeField(null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True, help_text="the Node object's labels (snapshot import)")
    snapshot = models.JSONField(default=dict, blank=True,
                                help_text="from the snapshot: capacity, allocatable, NRT availability, notes")
    removed_at = models.DateTimeField(null=True, blank=True,
                                      help_text="set when a newer snapshot no longer lists the node; sessions skip it")
    # denormalised summary for listings (kept in step by services.save_topology)
    num_cpus = models.PositiveIntegerField(default=0)
    num_numa_nodes = models.PositiveIntegerField(default=0)
    num_sockets = models.PositiveIntegerField(default=0)
    fingerprint = models.CharField(max_length=128, blank=True, default="")
    generation = models.PositiveBigIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    objects = NodeQuerySet.as_manager()

    # the audit trail (numaweb.access.history); the generation is often an F() expression at save time
    history = audited(excluded_fields=["topology", "generation"])
    #: not a column: set on the node services.import_node returns (how its pods were named, linked to jobs)
    import_notes: list[str]

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_name_in_cluster")]
        # what the dashboard, the cluster map and the headroom answers read of every node, answered from the index:
        # in the table these columns sit after the topology document, and reading them walked its overflow pages
        # (5,000 nodes: 62 → 20 ms of CPU for the dashboard's read)
        indexes = [models.Index(fields=["cluster", "name", "generation", "updated_at", "topology_manager_policy"],
                                name="node_versions")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}" if self.cluster_id else self.name

    @property
    def from_numatopology(self) -> bool:
        """Described by a Volcano Numatopology object (a snapshot or a single-file import)."""
        return "numatopo" in self.source_format.split("+")

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Saving a stored node advances its generation, in the database (an atomic increment, not a
        read-modify-write); the new value is read from the row when next used (a deferred field), so a
        writer saving thousands of nodes spends no query on it."""
        stored = self.pk is not None and not self._state.adding
        if stored:
            self.generation = F("generation") + 1
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "generation"}
        super().save(*args, **kwargs)
        if stored:
            del self.generation


class Allocation(models.Model):
    """Who holds what on a node. A pod's container holds at most one allocation in its cluster (a
    database constraint); every write goes through `services` with the node held (see its docstring)."""

    SCHEDULED, IMPORTED, REPLAYED, OBSERVED = "scheduled", "imported", "replayed", "observed"
    #: imported: read from the kubelet's state files; replayed: a snapshot's running pod placed by the
    #: engine's kubelet model (the real CPUs are not in a snapshot); observed: as the node's agent last
    #: reported the kubelet holding it (`observed_at`: that report's time)
    ORIGIN_CHOICES = [(SCHEDULED, "scheduled"), (IMPORTED, "imported"), (REPLAYED, "replayed"),
                      (OBSERVED, "observed")]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="allocations", editable=False,
                                help_text="the node's cluster (copied on save, for the one-holder constraint)")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="allocations")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="allocations",
                            editable=False, help_text="the job whose pod this is (by the pod's name), if any")
    pod = models.CharField(max_length=512, validators=[printable], help_text="namespace/name of the pod")
    container = models.CharField(max_length=253, blank=True, default="", validators=[printable],
                                 help_text="empty: the whole pod")
    cpus = models.CharField(max_length=4096, blank=True, default="", help_text="exclusive CPUs, e.g. 2-5,34-37")
    memory = models.JSONField(default=dict, blank=True, help_text='{"0": {"memory": 1073741824}}')
    devices = models.JSONField(default=dict, blank=True, help_text='{"nvidia.com/gpu": ["gpu0"]}')
    origin = models.CharField(max_length=16, choices=ORIGIN_CHOICES, default=SCHEDULED)
    session = models.ForeignKey("scheduling.SchedulingSession", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="allocations")
    observed_at = models.DateTimeField(null=True, blank=True,
                                       help_text="origin observed: the time of the agent's report that showed it")
    created_at = models.DateTimeField(auto_now_add=True)

    history = audited()  # the audit trail (numaweb.access.history)

    class Meta:
        ordering = ["node_id", "id"]
        indexes = [models.Index(fields=["node", "pod"])]
        constraints = [models.UniqueConstraint(fields=["cluster", "pod", "container"],
                                               name="allocation_one_per_pod_container")]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.node_id is not None and self.cluster_id is None:
            self.cluster_id = Node.objects.values_list("cluster_id", flat=True).get(pk=self.node_id)
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        who = f"{self.pod}/{self.container}" if self.container else self.pod
        return f"{who} on {self.node_id}: {self.cpus or '-'}"


class NodeReport(models.Model):
    """What a node's agent last sent (one row per node, not audited: an unchanged report only moves
    `received_at`, which is how a silent agent is told from a quiet node). `check` is the state check of
    the kubelet's checkpoints against the model (`state_check`), run on every changed report."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="report")
    digest = models.CharField(max_length=64, help_text="sha256 of the report without its time and agent")
    reported_at = models.DateTimeField(help_text="when the agent read the node (the report's time)")
    received_at = models.DateTimeField(help_text="the last report received, changed or not")
    changed_at = models.DateTimeField(help_text="the last report that changed the node or its allocations")
    agent = models.CharField(max_length=300, blank=True, default="", help_text="the agent's version and host")
    sender = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+", help_text="whose token sent the last report")
    state_check = models.JSONField(default=dict, blank=True,
                             help_text="the state check (model vs kubelet); empty without a cpu_manager_state")
    disagreements = models.PositiveIntegerField(default=0, help_text="containers (and findings) where the model "
                                                "and the kubelet disagree")
    pci_devices = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"report of {self.node_id} at {self.reported_at}"


class AgentBinding(models.Model):
    """The one cluster an agent account may report nodes of (`create_user NAME --role agent --cluster C`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_binding")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="agents")

    def __str__(self) -> str:
        return f"{self.user_id} reports for {self.cluster_id}"


def _bump_node(sender: type[Allocation], instance: Allocation, **kwargs: Any) -> None:
    """Any single allocation write (admin, API, shell) advances the node's generation, so a session
    that read the node before cannot commit on top of it. Bulk writers (a session commit, an import)
    insert without signals and advance their nodes themselves."""
    Node.objects.filter(pk=instance.node_id).advance()


models.signals.post_save.connect(_bump_node, sender=Allocation, dispatch_uid="allocation-bump-save")
models.signals.post_delete.connect(_bump_node, sender=Allocation, dispatch_uid="allocation-bump-delete")


class RejectedPod(models.Model):
    """A pod the kubelet of a node rejected (a snapshot's pod in phase Failed with an admission reason):
    it holds nothing. Its explanation (the admission replayed on the node as the import knew it) and its
    remedies (each checked by the engine) are computed by the import (`inventory.rejected`)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rejected_pods")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="rejected_pods")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=253, blank=True, default="")
    reason = models.CharField(max_length=64, help_text="the kubelet's admission reason (status.reason)")
    message = models.TextField(blank=True, default="", help_text="the kubelet's status.message")
    rejected_at = models.CharField(max_length=64, blank=True, default="",
                                   help_text="when, as the snapshot says it (RFC 3339)")
    job = models.CharField(max_length=253, blank=True, default="", help_text="the Volcano Job owning it")
    gang = models.CharField(max_length=253, blank=True, default="", help_text="its PodGroup")
    node_class = models.CharField(max_length=253, blank=True, default="",
                                  help_text="the node's machine and NUMA settings, for the cluster-wide counts")
    reproduced = models.BooleanField(default=False, help_text="the replay rejects it with the same reason")
    resource = models.CharField(max_length=253, blank=True, default="",
                                help_text="the resource the explanation names")
    explanation = models.JSONField(default=dict, blank=True)
    remedies = models.JSONField(default=list, blank=True)
    digest = models.CharField(max_length=64, blank=True, default="",
                              help_text="what the explanation and remedies were computed from: the pod as the "
                                        "snapshot says it and every listed node's generation")

    class Meta:
        ordering = ["cluster_id", "namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"],
                                               name="rejected_pod_unique_in_cluster")]
        indexes = [models.Index(fields=["cluster", "reason"]), models.Index(fields=["node", "name"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} rejected on {self.node_id}: {self.reason}"
