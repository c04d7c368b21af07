"""One way to submit a job, for both front ends (the jobs page's form and `POST /api/jobs/`): the same steps
in the same order, and every refusal a `Refused` naming the submission's field the one way `field_of` says.

`prepare` checks, in order: the manifest's one job (or the job the fields describe), the bounds every stored
job keeps (`bounds.check_job`), Volcano's whole-CPU rule for task policies, the cluster (given, else the only
one), and the name free in it. `submit` then writes the job (a concurrent create of the same name is refused
the same way). Nothing is written before `submit`.

Fields are named as the page names them: a job's `name`, `namespace`, `priority`, `min_available`, `queue`,
`tasks`, a task's `task` (its name), `replicas`, `topology_policy`, a container's `cpu`, `memory` and
`devices`, a template's `labels`, `annotations` and pod priority (on `tasks`: the page has no fields for
them); and `manifest`, `cluster`. Everything about a manifest is reported on `manifest` (its messages
name the manifest's own paths). The API folds a task's fields into its `tasks` list."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numaweb.inventory.models import Cluster
from scheduler_core.errors import EngineError
from scheduler_core.model.jobs import Job as EngineJob
from scheduler_core.model.pods import is_device_resource

from . import bounds, services
from .models import Job

#: the longest manifest either front end takes, in characters, and what both say past it
MAX_MANIFEST = 1_000_000
MANIFEST_TOO_LONG = f"a manifest is at most {MAX_MANIFEST:,} characters long"

#: the engine's `EngineError.field` values that are submission fields as they are
_ENGINE_FIELDS = frozenset({"name", "task", "replicas", "topology_policy", "min_available", "priority", "cpu",
                            "memory"})
#: the engine's fields of a pod template's metadata, reported on the job's `tasks`
_TEMPLATE_FIELDS = frozenset({"labels", "annotations", "pod_priority"})
_LARGEST_ID = 2**63 - 1  # a database's largest integer key
_WHOLE = re.compile(r"-?[0-9]+")


class Refused(ValueError):
    """A submission refused: `field` is the submission field at fault (None: the submission as a whole)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Submission:
    """A job that passed every check, ready for `submit`."""

    engine: EngineJob
    cluster: Cluster
    manifest: str  # the text it came from ("" for fields)
    source_format: str  # "yaml" (a manifest, YAML or JSON) or "json" (fields)
    explicit_min: bool  # store minAvailable as the job has it: always for a manifest, for fields when given

    @property
    def name_field(self) -> str:
        """Where the job's name was given: a clash of names is reported there."""
        return "manifest" if self.manifest else "name"


def field_of(exc: EngineError) -> str | None:
    """The submission field an engine error is about, from its `field` (never its message): hugepages are
    memory, a device-plugin resource is `devices`; None when the engine does not say."""
    field = exc.field
    if field is None or field in _ENGINE_FIELDS:
        return field
    if field in _TEMPLATE_FIELDS:
        return "tasks"
    if field.startswith("hugepages-"):
        return "memory"
    return "devices" if is_device_resource(field) else None


def cluster_by_id(value: object) -> Cluster:
    """The cluster a front end's `cluster` value names (its id, as a number or text); Refused otherwise."""
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, int | str) or not _WHOLE.fullmatch(text):
        raise Refused("cluster", f"a cluster is given by its id, a whole number, not {text[:40]}")
    # no int() of a long text (Python refuses past 4,300 digits): a key has at most 19
    pk = int(text) if len(text) <= 20 else None
    cluster = Cluster.objects.filter(pk=pk).first() if pk is not None and 0 < pk <= _LARGEST_ID else None
    if cluster is None:
        raise Refused("cluster", f"no cluster has the id {text if len(text) <= 40 else text[:40] + '…'}")
    return cluster


def prepare(manifest: str = "", job: Mapping[str, Any] | None = None, cluster: Cluster | None = None) -> Submission:
    """Check a job given as a `manifest` (Volcano Job / Pod YAML or JSON), or else as `job`, the API's JSON
    form (name, namespace, priority, min_available, queue, tasks with pod templates), for `cluster` (None: the
    only cluster there is). Raises Refused at the first problem; writes nothing."""
    if manifest.strip():
        engine = _from_manifest(manifest)
    else:
        engine = _from_fields(job or {})
    if cluster is None:
        try:
            cluster = services.default_cluster()
        except services.NoCluster as exc:
            raise Refused("cluster", str(exc)) from exc
    submission = Submission(engine, cluster, manifest if manifest.strip() else "",
                            "yaml" if manifest.strip() else "json",
                            bool(manifest.strip()) or (job or {}).get("min_available") is not None)
    if Job.objects.filter(cluster=cluster, namespace=engine.namespace, name=engine.name).exists():
        raise Refused(submission.name_field, services.job_exists_message(cluster, engine.namespace, engine.name))
    return submission


def _from_manifest(manifest: str) -> EngineJob:
    if len(manifest) > MAX_MANIFEST:
        raise Refused("manifest", MANIFEST_TOO_LONG)
    try:
        jobs = services.engine_jobs_from_manifest(manifest)
    except EngineError as exc:
        raise Refused("manifest", str(exc)) from exc
    if len(jobs) != 1:
        raise Refused("manifest", f"expected one job, found {len(jobs)}")
    try:
        bounds.check_job(jobs[0], manifest=True)
        services.check_policy_cpus(jobs[0])
    except (EngineError, bounds.OutOfBounds) as exc:
        raise Refused("manifest", str(exc)) from exc
    return jobs[0]


def _from_fields(job: Mapping[str, Any]) -> EngineJob:
    if not job.get("name"):
        raise Refused("name", "a job needs a name (or a manifest)")
    if not job.get("tasks"):
        raise Refused("tasks", "a job needs at least one task (or a manifest)")
    try:
        engine = services.engine_job_from_data(job)
        bounds.check_job(engine)
        services.check_policy_cpus(engine)
    except bounds.OutOfBounds as exc:
        raise Refused(exc.field, str(exc)) from exc
    except EngineError as exc:
        raise Refused(field_of(exc), str(exc)) from exc
    return engine


def submit(submission: Submission) -> Job:
    """Store the job; Refused on its name field when a concurrent create of the same name won."""
    try:
        return services.save_job(submission.engine, submission.cluster, submission.manifest,
                                 submission.source_format, explicit_min=submission.explicit_min)
    except services.JobExists as exc:
        raise Refused(submission.name_field, str(exc)) from exc
