"""The worker app's one table, each Celery worker's heartbeat; the status every run has, and the columns every
run's table shares (`Run`, abstract: sessions, comparison variants and make-room questions each have their own
table with these columns and what is theirs)."""

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


class Run(models.Model):
    """The columns of every run (numaweb.worker.runs owns their writes: claim, progress, failure, re-queue). A
    run kind's model adds its own; where it records when it was last queued is the kind's (`Kind.queued_field`)."""

    Status = RunStatus
    PENDING, RUNNING, DONE, FAILED = RunStatus.PENDING, RunStatus.RUNNING, RunStatus.DONE, RunStatus.FAILED

    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING, db_index=True)
    error = models.TextField(blank=True, default="")
    worker = models.CharField(max_length=255, blank=True, default="",
                              help_text="host:pid of the process running (or last running) it")
    runs = models.PositiveIntegerField(default=0, help_text="times it was started")
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def finished(self) -> bool:
        return self.status in (RunStatus.DONE, RunStatus.FAILED)
