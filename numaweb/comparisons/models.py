"""Comparisons: one cluster snapshot, one set of jobs, several variants (profile + kubelet
overrides) run side by side as dry runs. Each variant keeps its metrics and per-node NUMA use; the
comparison keeps the node generations it was asked on, and which nodes changed meanwhile."""

from __future__ import annotations

from typing import Any

from django.db import models

from numaweb.inventory.models import Cluster
from numaweb.jobs.models import Job
from numaweb.worker.models import Run, RunStatus


class KeyCount(models.Func):
    """The number of keys of a JSON object column, counted by the database (SQLite or PostgreSQL)."""

    output_field = models.IntegerField()
    template = "(SELECT COUNT(*) FROM json_each(%(expressions)s))"

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="(SELECT COUNT(*) FROM jsonb_object_keys(%(expressions)s))",
                           **extra)


class ComparisonQuerySet(models.QuerySet["Comparison"]):
    def summaries(self) -> models.QuerySet[Comparison]:
        """With the cluster and the variants, each without its per-node table (`nodes`: megabytes of JSON at
        5,000 nodes, which only the heat strips read), and the snapshot's nodes counted, not decoded."""
        return self.select_related("cluster").defer("snapshot").annotate(snapshot_nodes=KeyCount("snapshot")) \
            .prefetch_related(models.Prefetch("variants", ComparisonVariant.objects.defer("nodes")))


class Comparison(models.Model):
    Status = RunStatus  # of the comparison (derived from its variants) and of each variant
    PENDING, RUNNING, DONE, FAILED = RunStatus.PENDING, RunStatus.RUNNING, RunStatus.DONE, RunStatus.FAILED

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="comparisons")
    jobs = models.ManyToManyField(Job, blank=True, related_name="comparisons")
    shape = models.JSONField(null=True, blank=True, help_text="pod shape for headroom (Shape.to_dict), or null")
    snapshot = models.JSONField(default=dict, blank=True,
                                help_text="{node name: generation} when the comparison was asked for")
    changed_nodes = models.JSONField(default=list, blank=True,
                                     help_text="nodes whose generation moved away from the snapshot meanwhile")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ComparisonQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"comparison {self.pk} ({self.cluster_id})"

    @property
    def status(self) -> RunStatus:
        """From the variants: pending until one starts, running until the comparison is closed (its
        `finished_at`, written with the last variant's outcome), then done, or failed when any variant
        failed. Keying the end on `finished_at` keeps a reader that saw the row before that commit and
        the variants after it from reporting done without a finish time."""
        states = {v.status for v in self.variants.all()}
        if self.finished_at is not None:
            return self.FAILED if self.FAILED in states else self.DONE
        if not states or states == {self.PENDING}:
            return self.PENDING
        return self.RUNNING

    @property
    def snapshot_size(self) -> int:
        """Nodes in the snapshot: as `summaries()` counted them, else from the snapshot itself."""
        counted: int | None = getattr(self, "snapshot_nodes", None)
        return len(self.snapshot) if counted is None else counted

    def job_ids(self) -> list[int]:
        """Its jobs' ids in order, read from the link table alone (no job row)."""
        return list(self.jobs.through.objects.filter(comparison_id=self.pk).order_by("job_id")
                    .values_list("job_id", flat=True))

    @property
    def finished(self) -> bool:
        return self.status in (self.DONE, self.FAILED)


class ComparisonVariant(Run):
    """One variant of a comparison: a run (numaweb.worker.models.Run's columns) whose outcome is its metrics."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="variants")
    index = models.PositiveIntegerField()
    profile = models.CharField(max_length=16)
    settings = models.JSONField(default=dict, help_text="scheduler_core.scheduler.compare.Variant.to_dict()")
    label = models.CharField(max_length=255, blank=True, default="")
    queued_at = models.DateTimeField(null=True, blank=True, help_text="last sent to the workers")
    engine_ms = models.FloatField(null=True, blank=True, help_text="session + headroom time in the engine")
    metrics = models.JSONField(default=dict, blank=True)
    nodes = models.JSONField(default=list, blank=True,
                             help_text="per node after placement: numa [[free, capacity]...], largest_block, headroom")
    headroom = models.JSONField(null=True, blank=True)
    changed_nodes = models.JSONField(default=list, blank=True,
                                     help_text="nodes that differed from the snapshot when this variant read them")

    class Meta:
        ordering = ["comparison_id", "index"]
        constraints = [models.UniqueConstraint(fields=["comparison", "index"], name="comparison_variant_index")]

    def __str__(self) -> str:
        return f"{self.comparison_id}/{self.index} {self.label}"
