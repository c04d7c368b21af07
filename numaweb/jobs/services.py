"""Job rows ↔ engine `Job`/`Task`/`Pod`.

Two ways in: the API's own JSON (tasks with pod templates whose quantities are Kubernetes strings
such as "2", "500m", "8Gi"), and manifests (Volcano Job YAML, Pod YAML, or the same as JSON) read by
`scheduler_core.formats.load_jobs`. Validation is the engine's: its errors say what is wrong."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from django.db import IntegrityError, models, transaction
from django.db.models import Count, F, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce

from numaweb.inventory.models import Allocation, Cluster
from scheduler_core.errors import RequestError, check_int
from scheduler_core.formats import load_jobs
from scheduler_core.model.jobs import Job as EngineJob
from scheduler_core.model.jobs import Task as EngineTask
from scheduler_core.model.pods import APP, Container, Pod
from scheduler_core.model.quantity import count, cpu_milli
from scheduler_core.volcano.webhook import job_topology_policy_violation

from . import bounds
from .models import Job, Task

if TYPE_CHECKING:  # django-stubs' helper, a dev dependency only
    from django_stubs_ext import WithAnnotations


# -- pod templates ------------------------------------------------------------------------------
def _amounts(values: object, where: str) -> dict[str, int]:
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise RequestError(f"{where} must be an object of resource: quantity")
    out = {}
    for res, amount in values.items():
        res = str(res)
        out[res] = cpu_milli(amount, f"{where}.{res}") if res == "cpu" else count(amount, f"{where}.{res}", res)
    return out


def _container(data: object, where: str, kind: str) -> Container:
    if not isinstance(data, Mapping):
        raise RequestError(f"{where} must be an object with name, requests and limits")
    nested = data.get("resources")
    resources = nested if isinstance(nested, Mapping) else data
    return Container(str(data.get("name") or ""), _amounts(resources.get("requests"), f"{where}.requests"),
                     _amounts(resources.get("limits"), f"{where}.limits"), str(data.get("kind") or kind))


def _metadata(template: Mapping, key: str) -> tuple[tuple[str, str], ...]:
    """A template's `labels` or `annotations`: an object of strings (the Pod checks the strings)."""
    values = template.get(key)
    if values is None:
        return ()
    if not isinstance(values, Mapping):
        raise RequestError(f"template.{key} must be an object of key: value strings, not {type(values).__name__}",
                           key)
    return tuple(values.items())


def _pod_priority(template: Mapping) -> int | None:
    """A template's `priority` (the pod's spec.priority, which Koordinator reads): an integer or absent."""
    value = template.get("priority")
    if value is None:
        return None
    return check_int(value, "template.priority", None, field="pod_priority")


def pod_from_template(name: str, template: Mapping, namespace: str = "default") -> Pod:
    """Build an engine Pod from a template (quantities as strings or as engine integers; `labels` and
    `annotations` objects of strings, `priority` an integer)."""
    if not isinstance(template, Mapping):
        raise RequestError("template must be an object with containers")
    containers = template.get("containers")
    if not isinstance(containers, Sequence) or isinstance(containers, str) or not containers:
        raise RequestError("template.containers must be a non-empty list")
    inits = template.get("init_containers", template.get("initContainers")) or []
    if not isinstance(inits, Sequence) or isinstance(inits, str):
        raise RequestError("template.init_containers must be a list")
    try:
        return Pod(name, tuple(_container(c, f"containers[{i}]", APP) for i, c in enumerate(containers)),
                   tuple(_container(c, f"init_containers[{i}]", "init") for i, c in enumerate(inits)),
                   namespace=namespace, topology_policy=template.get("topology_policy") or None,
                   labels=_metadata(template, "labels"), annotations=_metadata(template, "annotations"),
                   priority=_pod_priority(template))
    except RequestError as exc:
        key = {"labels": "labels", "annotations": "annotations", "pod_priority": "priority"}.get(exc.field or "")
        if key and not str(exc).startswith("template."):
            raise RequestError(f"template.{key}: {exc}", exc.field) from None
        raise


def pod_from_stored(name: str, template: Mapping, namespace: str = "default") -> Pod:
    """An engine Pod from a stored template (already in engine integers, as `template_of` wrote it)."""
    def one(c: Mapping, kind: str) -> Container:
        return Container(c["name"], dict(c.get("requests") or {}), dict(c.get("limits") or {}), c.get("kind", kind))

    return Pod(name, tuple(one(c, APP) for c in template["containers"]),
               tuple(one(c, "init") for c in template.get("init_containers") or ()), namespace=namespace,
               topology_policy=template.get("topology_policy") or None,
               labels=_metadata(template, "labels"), annotations=_metadata(template, "annotations"),
               priority=_pod_priority(template))


def template_of(pod: Pod) -> dict[str, Any]:
    """An engine Pod as a stored template (integers: millicores, bytes, counts)."""
    def one(c: Container) -> dict[str, Any]:
        out: dict[str, Any] = {"name": c.name, "requests": dict(c.requests), "limits": dict(c.limits)}
        if c.kind != APP:
            out["kind"] = c.kind
        return out

    data: dict[str, Any] = {"containers": [one(c) for c in pod.containers]}
    if pod.init_containers:
        data["init_containers"] = [one(c) for c in pod.init_containers]
    if pod.topology_policy:
        data["topology_policy"] = pod.topology_policy
    if pod.labels:
        data["labels"] = dict(pod.labels)
    if pod.annotations:
        data["annotations"] = dict(pod.annotations)
    if pod.priority is not None:
        data["priority"] = pod.priority
    return data


# -- jobs ----------------------------------------------------------------------------------------
def engine_job_from_data(data: Mapping) -> EngineJob:
    """The API's JSON job form → an engine Job (raises RequestError/PolicyError on bad input)."""
    if not isinstance(data, Mapping):
        raise RequestError("a job must be an object")
    name = str(data.get("name") or "")
    namespace = str(data.get("namespace") or "default")
    tasks_data = data.get("tasks")
    if not isinstance(tasks_data, Sequence) or isinstance(tasks_data, str):
        raise RequestError("tasks must be a list")
    tasks = []
    for i, t in enumerate(tasks_data):
        if not isinstance(t, Mapping):
            raise RequestError(f"tasks[{i}] must be an object")
        tname = str(t.get("name") or "")
        template = pod_from_template(f"{name}-{tname}", t.get("template") or {}, namespace)
        tasks.append(EngineTask(tname, template, t.get("replicas", 1), t.get("topology_policy") or None))
    return EngineJob(name, tuple(tasks), data.get("min_available"), data.get("priority", 0),
                     str(data.get("queue") or "default"), namespace)


def check_policy_cpus(job: EngineJob) -> None:
    """Volcano's job admission rule, decided by the engine (`job_topology_policy_violation`): a task with
    a topology policy other than none asks for a whole, non-zero number of CPUs in every container
    (init containers included). Refused at submission with the webhook's message, naming the task and
    container (the error's field: `cpu`), rather than scheduled and silently left unaligned."""
    violation = job_topology_policy_violation(job)
    if violation:
        task, c, message = violation
        raise RequestError(f"task {task.name}: container {c.name} asks for {c.requests.get('cpu', 0)}m CPU, "
                           f"but topology policy {task.topology_policy} needs a whole number of CPUs ({message})",
                           "cpu")


def engine_jobs_from_manifest(text: str | bytes) -> list[EngineJob]:
    """Volcano Job / Pod / Deployment YAML (or their JSON) → engine Jobs, through the engine's reader.

    Passed as bytes so user text is never taken for a server path."""

    return list(load_jobs(text.encode() if isinstance(text, str) else bytes(text)))


def engine_jobs(jobs: models.QuerySet) -> tuple[list[Job], list[EngineJob]]:
    """These jobs in id order (without their manifests) and, in the same order, their engine Jobs. Two
    queries; the tasks are read as values, not Task instances: a session may read thousands of jobs."""
    rows = list(jobs.defer("manifest").order_by("id"))
    tasks: dict[int, list[tuple[str, Mapping, int, str]]] = {}
    for job_id, name, template, replicas, policy in (
            Task.objects.filter(job__in=jobs.values("pk")).order_by("job_id", "id")
            .values_list("job_id", "name", "template", "replicas", "topology_policy")):
        tasks.setdefault(job_id, []).append((name, template, replicas, policy))
    return rows, [_engine_job(job, tasks.get(job.pk, ())) for job in rows]


def _engine_job(job: Job, tasks: Iterable[tuple[str, Mapping, int, str]]) -> EngineJob:
    return EngineJob(job.name, tuple(
        EngineTask(name, pod_from_stored(f"{job.name}-{name}", template, job.namespace), replicas, policy or None)
        for name, template, replicas, policy in tasks
    ), job.min_available, job.priority, job.queue, job.namespace, job.pk)


class NoCluster(ValueError):
    """A job was submitted without a cluster while there is not exactly one to take."""


def default_cluster() -> Any:
    """The cluster a job submitted without one goes to: the only cluster there is (NoCluster otherwise)."""
    clusters = list(Cluster.objects.order_by("pk")[:2])
    if len(clusters) == 1:
        return clusters[0]
    count = Cluster.objects.count()
    raise NoCluster(f"required: {count} clusters exist, say which one the job runs in" if count
                    else "no cluster exists yet: create one (or import one) first")


class JobExists(ValueError):
    """A job of this (cluster, namespace, name) exists already (also when a concurrent create won the race)."""


def job_exists_message(cluster: Any, namespace: str, name: str) -> str:
    return f"job {namespace}/{name} already exists in cluster {cluster}"


def save_job(engine_job: EngineJob, cluster: Any, manifest: str = "", source_format: str = "json",
             explicit_min: bool = True) -> Job:
    """Store a validated engine Job as rows in `cluster`. Raises JobExists when the cluster already has a
    job of that namespace and name, whether found first or refused by the database (a concurrent create)."""
    min_available = engine_job.min_available if explicit_min else None
    try:
        with transaction.atomic():
            job = Job.objects.create(cluster=cluster, name=engine_job.name, namespace=engine_job.namespace,
                                     queue=engine_job.queue, priority=engine_job.priority,
                                     min_available=min_available, source_format=source_format, manifest=manifest)
            Task.objects.bulk_create([
                Task(job=job, name=t.name, replicas=t.replicas, topology_policy=t.topology_policy or "",
                     template=template_of(t.template))
                for t in engine_job.tasks
            ])
    except IntegrityError as exc:
        if Job.objects.filter(cluster=cluster, namespace=engine_job.namespace, name=engine_job.name).exists():
            raise JobExists(job_exists_message(cluster, engine_job.namespace, engine_job.name)) from exc
        raise
    return job


# -- status and release ----------------------------------------------------------------------------
def pod_uid(job: Job, task: str, index: int) -> str:
    """The uid the engine gives replica `index` of `task` (see `scheduler_core.model.jobs.Job.pods`)."""
    return f"{job.namespace}/{job.name}-{task}-{index}"


def job_for_pod(uid: str, cluster: Any) -> Job | None:
    """The job of `cluster` a pod belongs to, by its name `<namespace>/<job>-<task>-<index>` (None: no such job).

    One query, whatever the number of jobs: every split of the name into job and task is a candidate."""
    namespace, _, name = uid.partition("/")
    parts = name.split("-")
    if not namespace or len(parts) < 3 or not parts[-1].isdigit() or str(int(parts[-1])) != parts[-1]:
        return None
    index = int(parts[-1])
    candidates = {"-".join(parts[:k]): "-".join(parts[k:-1]) for k in range(1, len(parts) - 1)}
    for job in Job.objects.filter(cluster=cluster, namespace=namespace,
                                  name__in=list(candidates)).prefetch_related("tasks"):
        if any(t.name == candidates[job.name] and index < t.replicas for t in job.tasks.all()):
            return job
    return None


def pod_containers(uid: str, job: Job) -> set[str]:
    """The container names (app and init) of the job's pod `uid` (empty when the pod is not the job's)."""
    name = uid.partition("/")[2]
    for task in job.tasks.all():
        prefix = f"{job.name}-{task.name}-"
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            template = task.template or {}
            return {c.get("name", "") for key in ("containers", "init_containers") for c in template.get(key) or ()}
    return set()


def held_pods(job_ids: Iterable[int]) -> dict[int, set[str]]:
    """{job id: uids of its pods that hold an allocation} (jobs holding nothing are absent)."""
    out: dict[int, set[str]] = {}
    for job_id, pod in Allocation.objects.filter(job_id__in=list(job_ids)).values_list("job_id", "pod").distinct():
        out.setdefault(job_id, set()).add(pod)
    return out


def derive_status(job: Job, held: int) -> str:
    """The job's state from facts: finished, else how many pods hold resources against its gang minimum,
    else whether the last session that ran it failed to place it (`reason`)."""
    if job.finished_at is not None:
        return Job.FINISHED
    if held and held >= job.gang:
        return Job.SCHEDULED
    if held:
        return Job.PARTLY
    return Job.UNSCHEDULABLE if job.reason else Job.PENDING


def refresh_status(job_ids: Iterable[int | None]) -> None:
    """Recompute the stored status of these jobs from their allocations. Call it inside the transaction
    that changed them, after the write, with the nodes (and jobs) held: it then reads the truth."""
    ids = {i for i in job_ids if i is not None}
    if not ids:
        return
    held = held_pods(ids)
    for job in Job.objects.filter(pk__in=ids).prefetch_related("tasks"):
        status = derive_status(job, len(held.get(job.pk, ())))
        if status != job.status:
            Job.objects.filter(pk=job.pk).update(status=status)
            job.status = status


class NotSchedulable(ValueError):
    """A session named a job that has nothing left to place (every pod holds resources, or it is finished)."""


class PodCounts(TypedDict):
    pods: int
    held: int


def _pod_counts(jobs: models.QuerySet[Job]) -> models.QuerySet[WithAnnotations[Job, PodCounts]]:
    """The jobs annotated with `pods` (replicas over their tasks) and `held` (pods holding an allocation):
    two correlated aggregates, so choosing or checking thousands of jobs is one query, not a Task and an
    Allocation instance per pod."""
    pods = Task.objects.filter(job=OuterRef("pk")).values("job").annotate(n=Sum("replicas")).values("n")
    held = (Allocation.objects.filter(job=OuterRef("pk")).values("job")
            .annotate(n=Count("pod", distinct=True)).values("n"))
    return jobs.annotate(pods=Coalesce(Subquery(pods), 0), held=Coalesce(Subquery(held), 0))


def check_cluster(jobs: Iterable[Job], cluster: Any) -> None:
    """Refuse jobs of another cluster than `cluster` (NotSchedulable naming each job and its cluster)."""
    cluster_id = getattr(cluster, "pk", cluster)
    others = [job for job in jobs if job.cluster_id != cluster_id]
    if others:
        names = dict(Job.objects.filter(pk__in=[j.pk for j in others]).values_list("pk", "cluster__name"))
        raise NotSchedulable("; ".join(f"job {job} belongs to cluster {names.get(job.pk, job.cluster_id)}, "
                                       f"not to cluster {cluster}" for job in others))


def check_schedulable(jobs: Iterable[Job], cluster: Any = None) -> None:
    """Refuse jobs a session cannot place: jobs of another cluster than `cluster` (when given), finished
    ones, and ones whose every pod already holds resources (NotSchedulable, naming each job); and more pods
    than a session may schedule (bounds.OutOfBounds)."""
    jobs = list(jobs)
    if cluster is not None:
        check_cluster(jobs, cluster)
    counts = {pk: (finished, pods, held) for pk, finished, pods, held in _pod_counts(
        Job.objects.filter(pk__in=[j.pk for j in jobs])).values_list("pk", "finished_at", "pods", "held")}
    bounds.check_session(max(0, pods - held) for _f, pods, held in counts.values())
    problems = []
    for job in jobs:
        if job.pk not in counts:
            problems.append(f"job {job} no longer exists")
            continue
        finished, pods, held = counts[job.pk]
        if finished is not None:
            problems.append(f"job {job} is finished")
        elif pods and held >= pods:
            problems.append(f"job {job} is already scheduled: all its {pods} pods hold resources "
                            "(finish it to release them)")
    if problems:
        raise NotSchedulable("; ".join(problems))


def schedulable_jobs(cluster: Any, **filters: str) -> list[Job]:
    """Every job of `cluster` a session started without a list takes: not finished, with at least one pod
    holding nothing (without their manifests, which a session never reads). Comparisons take the same.
    `filters` (status, namespace, q) narrow them as `filter_jobs` does."""
    jobs = filter_jobs(Job.objects.filter(cluster=cluster, finished_at=None), **filters)
    return list(_pod_counts(jobs).filter(pods__gt=F("held")).defer("manifest").order_by("id"))


def filter_jobs(jobs: models.QuerySet, status: str = "", namespace: str = "", q: str = "") -> models.QuerySet:
    """The jobs page's and the API's list filter: `status` exactly, `namespace` exactly, `q` a part of the
    job's name (case-insensitive); an empty value filters nothing."""
    if status:
        jobs = jobs.filter(status=status)
    if namespace:
        jobs = jobs.filter(namespace=namespace)
    if q:
        jobs = jobs.filter(name__icontains=q)
    return jobs


def link_allocations(cluster: Any) -> None:
    """Give every allocation of the cluster that names no job the job its pod belongs to (bulk writers,
    such as a snapshot import, insert rows without it), then derive those jobs' statuses."""
    pods: dict[str, list[int]] = {}
    for pk, pod in Allocation.objects.filter(cluster=cluster, job=None).values_list("id", "pod"):
        pods.setdefault(pod, []).append(pk)
    linked = set()
    for pod, ids in pods.items():
        job = job_for_pod(pod, cluster)
        if job is not None:
            Allocation.objects.filter(pk__in=ids).update(job=job)
            linked.add(job.pk)
    refresh_status(linked)
