"""Volcano's job-side rules (ENGINE.md §3.2): the admission webhook's check of a task's topology policy,
the policy annotation the job controller puts on pods, and the pod QoS class they rely on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from ..model.jobs import Job, Task
from ..model.pods import Container, Pod, qos_class
from ..model.quantity import cpu_milli
from .policy import guaranteed_cpus, has_policy

# ------------------------------------------------------------------------------------------------
# Job-side helpers (webhook, annotation, job controller; ENGINE.md §3.2)
# ------------------------------------------------------------------------------------------------


POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"


# the parts of a Volcano Job manifest (parsed JSON or YAML) the webhook reads


class Resources(TypedDict, total=False):
    requests: Mapping[str, object]
    limits: Mapping[str, object]


class ContainerSpec(TypedDict, total=False):
    resources: Resources


class PodSpec(TypedDict, total=False):
    containers: Sequence[ContainerSpec]
    initContainers: Sequence[ContainerSpec]


class PodTemplate(TypedDict, total=False):
    spec: PodSpec


class TaskSpec(TypedDict, total=False):
    topologyPolicy: str
    template: PodTemplate


def task_topology_policy(annotations: Mapping[str, str] | None) -> str:
    """The scheduler's task policy: the annotation verbatim, "" when absent."""
    return (annotations or {}).get(POLICY_ANNOTATION) or ""


def job_pod_annotation(task_policy: str | None, template_annotation: str | None) -> str | None:
    """The job controller copies the template annotation, then overwrites it with a non-empty task policy."""
    return task_policy if task_policy else template_annotation


def _webhook_message(task_index: int, index: int) -> str:
    return f"the cpu request isn't an integer in spec.task[{task_index}] container[{index}]."


def validate_task_topology_policy(policy: str | None, containers: Sequence[Resources],
                                  init_containers: Sequence[Resources] = (), task_index: int = 0) -> str:
    """The job webhook's check (ENGINE.md §3.2) on one task's container resource dicts (`{"requests": ...,
    "limits": ...}`): with a policy, every container's cpu request (limits when requests are empty)
    must be whole CPUs; no cpu request counts as 0 CPUs. `task_index` is the task's place in the
    job. Returns the rejection message, "" when valid."""
    if not has_policy(policy):
        return ""
    for index, c in enumerate([*containers, *init_containers]):
        values = c.get("requests") or c.get("limits") or {}
        cpu = values.get("cpu")
        milli = cpu_milli(cpu, f"container[{index}] cpu") if cpu is not None else 0
        if guaranteed_cpus(milli) == 0:
            return _webhook_message(task_index, index)
    return ""


def validate_job_tasks(tasks: Sequence[TaskSpec]) -> str:
    """The webhook's check over a Volcano Job manifest's `spec.tasks`: the first task that fails names
    its own index in the message; "" when every task is valid."""
    for task_index, task in enumerate(tasks):
        spec = (task.get("template") or {}).get("spec") or {}
        containers = [c.get("resources") or {} for c in spec.get("containers") or ()]
        inits = [c.get("resources") or {} for c in spec.get("initContainers") or ()]
        message = validate_task_topology_policy(task.get("topologyPolicy"), containers, inits, task_index)
        if message:
            return message
    return ""


def job_topology_policy_violation(job: Job) -> tuple[Task, Container, str] | None:
    """The same check on an engine Job (requests already defaulted from limits): the first task and
    container the webhook would refuse, with its message; None when the job is valid."""
    for task_index, task in enumerate(job.tasks):
        if not has_policy(task.topology_policy):
            continue
        pod = task.template
        for index, c in enumerate([*pod.containers, *pod.init_containers]):
            if guaranteed_cpus(c.requests.get("cpu", 0)) == 0:
                return task, c, _webhook_message(task_index, index)
    return None


def pod_qos(containers: Sequence[Container], init_containers: Sequence[Container] = (),
            status_qos_class: str | None = None) -> str:
    """GetPodQOS as the plugin's gate reads it (ENGINE.md §3.2): a non-empty `status.qosClass` is returned as
    it is; otherwise the class the containers' requests and limits give."""
    if status_qos_class:
        return status_qos_class
    return qos_class(Pod("qos-probe", tuple(containers), tuple(init_containers)))
