"""Workloads: Volcano `batch.volcano.sh/v1alpha1` Jobs, plain Pods and Deployments (YAML or JSON,
multi-document, `kind: List` too) → `Job` objects.

- Job: `spec.tasks[]` (name, replicas, `topologyPolicy`, template), `spec.minAvailable` (default:
  every replica), `spec.queue`, `spec.priority` (an int) or `spec.priorityClassName` (the two
  built-in system classes are known; other names give 0 and a note).
- Pod: one task `pod` of one replica, `minAvailable` 1. Deployment: one task `pod` of
  `spec.replicas` (default 1) replicas and `minAvailable` 1 (each Deployment pod is its own
  PodGroup in Volcano, so one placed pod is progress). A Pod's non-empty `status.qosClass` is its
  QoS class as it is (as GetPodQOS reads it), whatever its resources say.
- Pod templates: `containers`, `initContainers` (`restartPolicy: Always` makes a sidecar),
  `resources.requests/limits` as Kubernetes quantities (cpu → millicores, memory and hugepages →
  bytes, anything else a whole count); the `volcano.sh/numa-topology-policy` annotation; the
  template's `metadata.labels`, `metadata.annotations` (but kubectl's `last-applied-configuration`,
  a copy of the object nothing here reads) and `spec.priority`, kept on the pod for the schedulers
  that read them (Koordinator's QoS class, priority class, resource and NUMA topology specs).
Errors keep their class (RequestError, PolicyError, FormatError) and name the document and field.
"""

from __future__ import annotations

from typing import cast

from ..errors import EngineError, FormatError, PolicyError, RequestError, check_int
from ..model.jobs import Job, Task
from ..model.kubelet_config import TOPOLOGY_POLICIES
from ..model.pods import APP, INIT, QOS_CLASSES, SIDECAR, Container, Pod, printable_annotation
from ..model.quantity import count, cpu_milli
from ._documents import JSONObject, get_list, get_object, load_documents

ANNOTATION = "volcano.sh/numa-topology-policy"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_Pairs = tuple[tuple[str, str], ...]
SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def load_jobs(text: str, name: str = "workload") -> list[Job]:
    docs = load_documents(text, name)
    jobs: list[Job] = []
    objects: list[tuple[str, object]] = []
    for i, doc in enumerate(docs, 1):
        if doc is None:
            continue
        if isinstance(doc, list):
            objects.extend((f"document {i} item {j}", d) for j, d in enumerate(doc))
        elif isinstance(doc, dict) and doc.get("kind") == "List":
            items = get_list(doc, "items", f"{name}: document {i}")
            objects.extend((f"document {i} item {j}", d) for j, d in enumerate(items))
        else:
            objects.append((f"document {i}", doc))
    for submitted, (where, obj) in enumerate(objects):
        if not isinstance(obj, dict):
            raise FormatError(f"{name}: {where} is not an object")
        jobs.append(_object(obj, f"{name}: {where}", submitted))
    if not jobs:
        raise FormatError(f"{name}: no Job, Pod or Deployment found")
    names = [(j.namespace, j.name) for j in jobs]
    for key in names:
        if names.count(key) > 1:
            raise RequestError(f"{name}: job {key[1]!r} in namespace {key[0]!r} appears twice")
    return jobs


def _rethrow(exc: EngineError, where: str) -> EngineError:
    return type(exc)(f"{where}: {exc}", exc.field)


def _object(obj: JSONObject, where: str, submitted: int) -> Job:
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise FormatError(f"{where}: metadata must be an object")
    job_name = meta.get("name")
    if not isinstance(job_name, str) or not job_name:
        raise RequestError(f"{where}: metadata.name is required")
    namespace = str(meta.get("namespace") or "default")
    where = f"{where} ({kind} {job_name})"
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise FormatError(f"{where}: spec must be an object")
    try:
        if kind == "Job":
            if not str(obj.get("apiVersion", "")).startswith("batch.volcano.sh/"):
                raise FormatError(f"{where}: only Volcano Jobs (batch.volcano.sh/v1alpha1) are supported, not "
                                  f"{obj.get('apiVersion')!r}")
            return _volcano_job(spec, job_name, namespace, where, submitted)
        if kind == "Pod":
            pod = _pod(obj, job_name, namespace, where)
            return Job(job_name, (Task("pod", pod, 1),), 1, namespace=namespace, submitted=submitted)
        if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
            replicas = _int(spec.get("replicas", 1), f"{where}: spec.replicas")
            template = spec.get("template")
            if not isinstance(template, dict):
                raise FormatError(f"{where}: spec.template must be a pod template")
            pod = _pod(template, job_name, namespace, f"{where}: spec.template")
            return Job(job_name, (Task("pod", pod, replicas),), min(1, replicas), namespace=namespace,
                       submitted=submitted)
    except EngineError as exc:
        if str(exc).startswith(where):
            raise
        raise _rethrow(exc, where) from None
    raise FormatError(f"{where}: kind {kind!r} is not a Job, Pod or Deployment")


def _int(value: object, what: str, minimum: int = 0) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)  # YAML authors quote numbers
    return check_int(value, what, minimum)


def _policy(value: object, what: str) -> str | None:
    if value is None or value == "":
        return None
    if value not in TOPOLOGY_POLICIES:
        raise PolicyError(f"{what}: unknown topology policy {value!r}; expected one of: {', '.join(TOPOLOGY_POLICIES)}")
    return str(value)


def _volcano_job(spec: JSONObject, name: str, namespace: str, where: str, submitted: int) -> Job:
    tasks_spec = spec.get("tasks")
    if not isinstance(tasks_spec, list) or not tasks_spec:
        raise RequestError(f"{where}: spec.tasks must be a non-empty list")
    tasks = []
    seen: set[str] = set()
    for i, t in enumerate(tasks_spec):
        tw = f"spec.tasks[{i}]"
        if not isinstance(t, dict):
            raise FormatError(f"{where}: {tw} must be an object")
        task_name = t.get("name") or f"task{i}"
        if not isinstance(task_name, str):
            raise RequestError(f"{where}: {tw}.name must be a string")
        if task_name in seen:
            raise RequestError(f"{where}: {tw}.name {task_name!r} is used by an earlier task")
        seen.add(task_name)
        replicas = _int(t.get("replicas", 1), f"{tw}.replicas")
        policy = _policy(t.get("topologyPolicy"), f"{tw}.topologyPolicy")
        template = t.get("template")
        if not isinstance(template, dict):
            raise FormatError(f"{where}: {tw}.template must be a pod template")
        pod = _pod(template, f"{name}-{task_name}", namespace, f"{tw}.template")
        tasks.append(Task(task_name, pod, replicas, policy))
    total = sum(t.replicas for t in tasks)
    stated = spec.get("minAvailable")
    min_available = None
    if stated is not None:
        min_available = _int(stated, "spec.minAvailable")
        if min_available > total:
            raise RequestError(f"spec.minAvailable ({min_available}) is more than the {total} replicas of its tasks")
    priority = 0
    if spec.get("priority") is not None:
        priority = _int(spec["priority"], "spec.priority", minimum=-(2**31))
    elif spec.get("priorityClassName"):
        priority = SYSTEM_PRIORITIES.get(str(spec["priorityClassName"]), 0)
    queue = str(spec.get("queue") or "default")
    return Job(name, tuple(tasks), min_available, priority, queue, namespace, submitted)


def _pod(obj: JSONObject, name: str, namespace: str, where: str) -> Pod:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise FormatError(f"{where}: spec must be an object")
    if not isinstance(meta, dict):
        meta = {}
    annotations = get_object(meta, "annotations", f"{where}: metadata")
    labels = get_object(meta, "labels", f"{where}: metadata")
    policy = _policy(annotations.get(ANNOTATION), f"{where}: metadata.annotations[{ANNOTATION}]")
    priority = None
    if spec.get("priority") is not None:
        priority = _int(spec["priority"], f"{where}: spec.priority", minimum=-(2**31))
    containers = tuple(_container(c, APP, f"{where}: spec.containers[{i}]")
                       for i, c in enumerate(_list(spec.get("containers"), f"{where}: spec.containers")))
    if not containers:
        raise RequestError(f"{where}: spec.containers must list at least one container")
    inits = tuple(_container(c, SIDECAR if isinstance(c, dict) and c.get("restartPolicy") == "Always" else INIT,
                             f"{where}: spec.initContainers[{i}]")
                  for i, c in enumerate(_list(spec.get("initContainers"), f"{where}: spec.initContainers")))
    # GetPodQOS returns a non-empty status.qosClass as it is (a Pod object, not a template)
    status = obj.get("status")
    qos = status.get("qosClass") if isinstance(status, dict) else None
    if qos and qos not in QOS_CLASSES:
        raise RequestError(f"{where}: status.qosClass {qos!r} is not one of {', '.join(QOS_CLASSES)}")
    # the values are JSON's: the Pod checks they are strings
    # an annotation whose text holds control or format characters is left out rather than the whole file
    # refused: nothing a scheduler reads is written so, and other tools' annotations may be
    kept = cast(_Pairs, tuple((k, v) for k, v in annotations.items()
                              if k != LAST_APPLIED and not (isinstance(v, str) and not printable_annotation(v))))
    try:
        return Pod(name, containers, inits, namespace, qos=str(qos) if qos else None, topology_policy=policy,
                   labels=cast(_Pairs, tuple(labels.items())), annotations=kept, priority=priority)
    except RequestError as exc:
        if exc.field in ("labels", "annotations"):
            raise RequestError(f"{where}: metadata.{exc.field}: {exc}", exc.field) from None
        if exc.field == "pod_priority":
            raise RequestError(f"{where}: spec.priority: {exc}", exc.field) from None
        raise


def _list(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FormatError(f"{what} must be a list")
    return value


def _container(c: object, kind: str, where: str) -> Container:
    if not isinstance(c, dict):
        raise FormatError(f"{where} must be an object")
    cname = c.get("name")
    if not isinstance(cname, str) or not cname:
        raise RequestError(f"{where}: name is required")
    resources = c.get("resources") or {}
    if not isinstance(resources, dict):
        raise FormatError(f"{where}: resources must be an object")
    amounts = {}
    for section in ("requests", "limits"):
        values = resources.get(section) or {}
        if not isinstance(values, dict):
            raise FormatError(f"{where}: resources.{section} must be an object")
        out = {}
        for res, q in values.items():
            what = f"{where}: resources.{section}.{res}"
            out[str(res)] = cpu_milli(q, what) if res == "cpu" else count(q, what, str(res))
        amounts[section] = out
    try:
        return Container(cname, amounts["requests"], amounts["limits"], kind)
    except EngineError as exc:
        raise _rethrow(exc, where) from None
