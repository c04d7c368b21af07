"""The worker app's one table, each Celery worker's heartbeat, and the status every run has."""

from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """A Celery worker's sign of life, written by its housekeeping thread (numaweb.worker.housekeeping) every third
    of NUMAWEB_WORKER_TIMEOUT and deleted when it stops; /healthz and the pages' banner read it. In the database
    because the web and the workers share nothing else (in docker-compose they are separate containers)."""

    name = models.CharField(max_length=255, unique=True, help_text="the Celery node name (name@host)")
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "scheduling_workerheartbeat"  # created by the scheduling app, which owned it first

    def __str__(self) -> str:
        return f"{self.name} (pid {self.pid})"


class RunStatus(models.TextChoices):
    """Where a run is (a session, a comparison variant, a make-room question: numaweb.worker.runs)."""

    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
