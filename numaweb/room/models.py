"""Make-room questions: "what is the least I must move so that this job (or shape × count) fits?"
A row is the question (target, profile, what may not move) and, once a worker has answered it, the
verified plan (`result`) and the dry-run session that verified it (`session`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from numaweb.inventory.models import Cluster
from numaweb.jobs.models import Job
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.models import Run


class RoomPlan(Run):
    """A make-room question: a run (numaweb.worker.models.Run's columns) whose outcome is the verified plan."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="room_plans")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="room_plans",
                            help_text="the pending job to make room for (or a shape × count)")
    shape = models.JSONField(null=True, blank=True, help_text="pod shape (compare.Shape.to_dict) when no job")
    count = models.PositiveIntegerField(default=0, help_text="pods of the shape (a gang of all of them)")
    profile = models.CharField(max_length=16, default="aligned")
    options = models.JSONField(default=dict, blank=True,
                               help_text="allow_evictions, protected_namespaces, max_priority, pinned, max_moves")
    queued_at = models.DateTimeField(null=True, blank=True, help_text="last sent to the workers")
    created_at = models.DateTimeField(auto_now_add=True)
    engine_ms = models.FloatField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="the plan (room.RoomPlan.to_dict) and node grids")
    session = models.ForeignKey(SchedulingSession, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="room_plans", help_text="the dry run that verified the plan")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+", help_text="who asked (NUMAWEB_MAKE_ROOM_QUEUED_PER_USER)")

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"make room {self.pk} ({self.cluster_id}, {self.status})"

    @property
    def target_label(self) -> str:
        if self.job_id is not None:
            return str(self.job)
        shape = self.shape or {}
        return f"{self.count} × {shape.get('cpu')} CPU {shape.get('memory') or ''} {shape.get('policy') or ''}".strip()


class DefragRun(Run):
    """The queue ranked (the defragmentation advisor): make room over a cluster's pending jobs, one run. Its
    outcome (`result`) ranks the jobs, marks conflicting plans and proposes a compatible set, verified by one
    dry-run session (`session`) placing every job it names after its moves."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="defrag_runs")
    profile = models.CharField(max_length=16, default="aligned")
    options = models.JSONField(default=dict, blank=True,
                               help_text="protected_namespaces, max_priority, pinned, max_moves, weight, profile_from")
    queued_at = models.DateTimeField(null=True, blank=True, help_text="last sent to the workers")
    created_at = models.DateTimeField(auto_now_add=True)
    engine_ms = models.FloatField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="the ranked jobs and the proposal (defrag.Advice)")
    session = models.ForeignKey(SchedulingSession, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="defrag_runs", help_text="the dry run that verified the proposal")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+", help_text="who asked")

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"defrag {self.pk} ({self.cluster_id}, {self.status})"
