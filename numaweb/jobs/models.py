"""Jobs as submitted: a job of tasks, each a pod template with replicas and a topology policy.

The pod template is stored in the engine's units (CPU in millicores, bytes, device counts) as
`{"containers": [{"name", "requests", "limits"}], "init_containers": [... "kind"]}`; the original
manifest (YAML or JSON text) is kept verbatim for display."""

from __future__ import annotations

from django.db import models

from numaweb.access.history import audited
from numaweb.inventory.models import TOPOLOGY_POLICY_CHOICES


class Job(models.Model):
    """A submitted job, in one cluster (its name is unique per cluster and namespace). `status` is derived
    (`services.refresh_status`), never set from a session's view:
    from how many of its pods hold an allocation, its gang minimum, `reason` (why the last session did
    not place it) and `finished_at`."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        SCHEDULED = "scheduled", "scheduled"
        PARTLY = "partly_scheduled", "partly scheduled"
        UNSCHEDULABLE = "unschedulable", "unschedulable"
        FINISHED = "finished", "finished"

    PENDING, SCHEDULED, PARTLY, UNSCHEDULABLE, FINISHED = Status

    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="jobs",
                                help_text="the cluster the job runs in: sessions, comparisons and forms of that "
                                          "cluster see it, no other")
    name = models.CharField(max_length=253)
    namespace = models.CharField(max_length=63, default="default")
    queue = models.CharField(max_length=253, default="default")
    priority = models.IntegerField(default=0)
    min_available = models.PositiveIntegerField(null=True, blank=True,
                                                help_text="gang minimum; empty means every replica")
    status = models.CharField(max_length=16, choices=Status.choices, default=PENDING, editable=False)
    reason = models.TextField(blank=True, default="", editable=False,
                              help_text="why the last session that ran it did not place it (empty: it did)")
    finished_at = models.DateTimeField(null=True, blank=True, editable=False,
                                       help_text="set when the job is finished; its allocations are released")
    source_format = models.CharField(max_length=32, default="json")
    manifest = models.TextField(blank=True, default="", help_text="the submitted document, verbatim")
    created_at = models.DateTimeField(auto_now_add=True)

    history = audited()  # the audit trail (numaweb.access.history)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"],
                                               name="job_unique_name_in_cluster")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def replicas(self) -> int:
        return sum(t.replicas for t in self.tasks.all())

    @property
    def gang(self) -> int:
        """Pods that must hold resources for the job to count as scheduled (minAvailable, else all)."""
        return self.replicas if self.min_available is None else self.min_available


class Task(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=253)
    replicas = models.PositiveIntegerField(default=1)
    topology_policy = models.CharField(max_length=32, choices=TOPOLOGY_POLICY_CHOICES, blank=True, default="")
    template = models.JSONField(help_text="pod template in engine units")

    class Meta:
        ordering = ["job_id", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="task_unique_name_in_job")]

    def __str__(self) -> str:
        return f"{self.job}/{self.name}"

    @property
    def pod_labels(self) -> list[tuple[str, str]]:
        """The template's labels as (key, value) pairs (a page cannot look up a key such as `items`)."""
        return sorted((self.template.get("labels") or {}).items())

    @property
    def pod_annotations(self) -> list[tuple[str, str]]:
        return sorted((self.template.get("annotations") or {}).items())

    @property
    def pod_priority(self) -> int | None:
        """The template's pod priority (spec.priority), None when it has none."""
        priority = self.template.get("priority")
        return priority if isinstance(priority, int) else None
