"""Scheduling sessions and their results.

Results are stored compactly: one `Placement` row per pod (where it went, what it holds, predicted
vs admitted) carrying that pod's verdicts grouped by node class as JSON; nodes of one class (same
shape, settings and free state) share one verdict, and the class → node names map is stored once on
the session (`summary["node_classes"]`). A 5,000-node session therefore writes one row per pod, not
one per pod × node."""

from __future__ import annotations

from django.db import models

from numaweb.access.history import audited
from numaweb.inventory.models import Cluster, Node
from numaweb.jobs.models import Job
from scheduler_core.profiles import PROFILES as ENGINE_PROFILES


class SchedulingSession(models.Model):
    PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
    STATUS_CHOICES = [(PENDING, "pending"), (RUNNING, "running"), (DONE, "done"), (FAILED, "failed")]
    PROFILES = tuple(ENGINE_PROFILES)  # the engine's registry is the one list of profiles
    PROFILE_CHOICES = [(p, p) for p in PROFILES]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="sessions")
    jobs = models.ManyToManyField(Job, blank=True, related_name="sessions",
                                  help_text="jobs to schedule; empty at creation means every pending job")
    profile = models.CharField(max_length=16, choices=PROFILE_CHOICES, default="volcano")
    dry_run = models.BooleanField(default=False, help_text="compute placements without allocating")
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=PENDING, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0, help_text="commit attempts (retries after a lost race)")
    runs = models.PositiveIntegerField(default=0, help_text="times the session was started")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True,
                                        help_text="last sign of life from the worker running it (progress writes)")
    worker = models.CharField(max_length=255, blank=True, default="",
                              help_text="host:pid of the process running (or last running) it")
    engine_ms = models.FloatField(null=True, blank=True, help_text="time inside the engine")
    commit_ms = models.FloatField(null=True, blank=True, help_text="time writing results")
    pods_total = models.PositiveIntegerField(default=0)
    pods_placed = models.PositiveIntegerField(default=0)
    pods_admitted = models.PositiveIntegerField(default=0)
    jobs_total = models.PositiveIntegerField(default=0)
    jobs_placed = models.PositiveIntegerField(default=0)
    nodes_total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    summary = models.JSONField(default=dict, blank=True,
                               help_text="session-level results: node classes, per-job outcome, reasons")

    history = audited(excluded_fields=["summary"])  # the audit trail (numaweb.access.history)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"session {self.pk} ({self.profile}, {self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (self.DONE, self.FAILED)


class Placement(models.Model):
    """One pod's outcome: node (None when unplaced), resources, predicted/admitted, and verdicts."""

    session = models.ForeignKey(SchedulingSession, on_delete=models.CASCADE, related_name="placements")
    index = models.PositiveIntegerField(help_text="order in which the engine considered the pod")
    namespace = models.CharField(max_length=63, default="default")
    job = models.CharField(max_length=512)
    task = models.CharField(max_length=253, blank=True, default="")
    pod = models.CharField(max_length=512)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="placements")
    node_name = models.CharField(max_length=253, blank=True, default="")
    cpus = models.CharField(max_length=4096, blank=True, default="")
    memory = models.JSONField(default=dict, blank=True)
    devices = models.JSONField(default=dict, blank=True)
    predicted = models.BooleanField(default=False, help_text="the scheduler placed it")
    admitted = models.BooleanField(null=True, blank=True, help_text="the kubelet would admit it there")
    reason = models.TextField(blank=True, default="")
    detail = models.JSONField(default=dict, blank=True,
                              help_text="the engine's record for this pod beyond the columns (verdicts per node class)")

    class Meta:
        ordering = ["session_id", "index"]
        constraints = [models.UniqueConstraint(fields=["session", "index"], name="placement_unique_index")]

    def __str__(self) -> str:
        return f"{self.pod} → {self.node_name or '(unplaced)'}"


class WorkerHeartbeat(models.Model):
    """A Celery worker's sign of life, written by its housekeeping thread (scheduling.housekeeping) every third
    of NUMAWEB_WORKER_TIMEOUT and deleted when it stops; /healthz and the pages' banner read it. In the database
    because the web and the workers share nothing else (in docker-compose they are separate containers)."""

    name = models.CharField(max_length=255, unique=True, help_text="the Celery node name (name@host)")
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.name} (pid {self.pid})"
