"""The limits every job passes before it is stored, whichever way it came in (API fields, a manifest, the
page form, the admin): names as Kubernetes validates them, priority within int32, replicas per task and
pods per job within the settings, minAvailable within the replicas. A violation raises `OutOfBounds`
naming the field (as the caller's form names it) and the limit, with the setting that changes it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from django.conf import settings

from scheduler_core.model.jobs import Job as EngineJob

INT32 = (-(2**31), 2**31 - 1)
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(_LABEL)
DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")


class OutOfBounds(ValueError):
    """`field`: the input field at fault (names of the caller's form); the message says the limit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_subdomain(value: str, what: str, field: str) -> None:
    """A Kubernetes object name (DNS-1123 subdomain): at most 253 characters of lower-case letters, digits,
    '-' and '.', starting and ending with a letter or digit."""
    if len(value) > 253:
        raise OutOfBounds(field, f"{what} is {len(value)} characters long; Kubernetes allows at most 253")
    if not DNS1123_SUBDOMAIN.fullmatch(value):
        raise OutOfBounds(field, f"{what} {value[:80]!r} is not a valid name: lower-case letters, digits, '-' and "
                                 "'.', starting and ending with a letter or digit (DNS-1123 subdomain)")


def check_label(value: str, what: str, field: str) -> None:
    """A namespace or task name (DNS-1123 label): at most 63 lower-case letters, digits and '-', starting and
    ending with a letter or digit."""
    if len(value) > 63:
        raise OutOfBounds(field, f"{what} is {len(value)} characters long; Kubernetes allows at most 63")
    if not DNS1123_LABEL.fullmatch(value):
        raise OutOfBounds(field, f"{what} {value[:80]!r} is not a valid name: lower-case letters, digits and '-', "
                                 "starting and ending with a letter or digit (DNS-1123 label)")


def check_int32(value: int, what: str, field: str) -> None:
    if not INT32[0] <= value <= INT32[1]:
        raise OutOfBounds(field, f"{what} {value} is outside the 32-bit range {INT32[0]} to {INT32[1]}")


def check_job(job: EngineJob, fields: Mapping[str, str] | None = None, manifest: bool = False) -> None:
    """Raise OutOfBounds unless `job` is within every limit. `fields` maps the logical names (name,
    namespace, priority, min_available, replicas, task) to the caller's field names; unmapped ones keep
    their logical name. A `manifest` job is reported under the field `manifest`, its messages naming the
    manifest's own paths (spec.tasks[0].replicas...)."""
    f = {k: "manifest" if manifest else k for k in ("name", "namespace", "priority", "min_available", "replicas",
                                                      "task")}
    f.update(fields or {})
    at = {"name": "metadata.name", "namespace": "metadata.namespace", "priority": "spec.priority",
          "min_available": "spec.minAvailable", "tasks": "spec.tasks"} if manifest else {
        "name": "job name", "namespace": "namespace", "priority": "priority", "min_available": "minAvailable",
        "tasks": "tasks"}
    check_subdomain(job.name, at["name"], f["name"])
    check_label(job.namespace, at["namespace"], f["namespace"])
    check_int32(job.priority, at["priority"], f["priority"])
    per_task, per_job = settings.NUMAWEB_MAX_REPLICAS_PER_TASK, settings.NUMAWEB_MAX_PODS_PER_JOB
    total = 0
    for i, task in enumerate(job.tasks):
        check_label(task.name, f"{at['tasks']}[{i}].name", f["task"])
        if task.replicas > per_task:
            raise OutOfBounds(f["replicas"], f"{at['tasks']}[{i}].replicas: {task.replicas} is more than the limit "
                                             f"of {per_task} replicas per task (NUMAWEB_MAX_REPLICAS_PER_TASK)")
        total += task.replicas
        last = f"{job.name}-{task.name}-{max(task.replicas - 1, 0)}"
        if len(last) > 253:
            raise OutOfBounds(f["name"], f"pod name {last[:60]}... would be {len(last)} characters long; "
                                         "Kubernetes allows at most 253 (shorten the job or task name)")
    if total > per_job:
        raise OutOfBounds(f["replicas"], f"the job has {total} pods, more than the limit of {per_job} pods per job "
                                         "(NUMAWEB_MAX_PODS_PER_JOB)")
    if job.min_available is not None and job.min_available > total:
        raise OutOfBounds(f["min_available"], f"{at['min_available']} ({job.min_available}) is more than the job's "
                                              f"{total} replicas")


def check_session(pods: Iterable[int]) -> None:
    """Raise OutOfBounds (field `jobs`) when a session would schedule more pods than the setting allows."""
    total, limit = sum(pods), settings.NUMAWEB_MAX_PODS_PER_SESSION
    if total > limit:
        raise OutOfBounds("jobs", f"the session would schedule {total} pods, more than the limit of {limit} pods "
                                  "per session (NUMAWEB_MAX_PODS_PER_SESSION); name fewer jobs")
