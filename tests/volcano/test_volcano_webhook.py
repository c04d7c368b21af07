"""Volcano's job webhook rule (on engine Jobs and on manifest dicts), the integer-CPU rule and the QoS gate."""

import pytest

from scheduler_core import Container, Job, Pod, Task
from scheduler_core.errors import RequestError
from scheduler_core.formats.workloads import load_jobs
from scheduler_core.volcano.cpumanager.provider import NumaModel
from scheduler_core.volcano.numaaware import VolcanoTask, predicate
from scheduler_core.volcano.policy import guaranteed_cpus
from scheduler_core.volcano.webhook import (
    job_topology_policy_violation,
    pod_qos,
    validate_job_tasks,
    validate_task_topology_policy,
)

GiB = 1 << 30


def _job(policy, app_milli, init_milli=None):
    init = (Container.guaranteed("setup", init_milli, GiB, kind="init"),) if init_milli is not None else ()
    pod = Pod("t", (Container.guaranteed("app", app_milli, GiB),), init)
    return Job("j", (Task("ok", Pod("o", (Container.guaranteed("c", 1000, GiB),))), Task("t", pod, 1, policy)))


def _dicts(milli):
    return [{"requests": {"cpu": f"{milli}m"}}]


def test_whole_cpus_pass_and_no_policy_is_never_checked():
    assert job_topology_policy_violation(_job("single-numa-node", 2000, 1000)) is None
    assert job_topology_policy_violation(_job(None, 1500)) is None
    assert job_topology_policy_violation(_job("none", 1500)) is None


def test_fractional_app_or_init_container_is_refused_with_the_webhook_text():
    task, container, message = job_topology_policy_violation(_job("best-effort", 1500))
    assert (task.name, container.name) == ("t", "app")
    assert message == validate_task_topology_policy("best-effort", _dicts(1500), task_index=1)
    assert message == "the cpu request isn't an integer in spec.task[1] container[0]."
    task, container, message = job_topology_policy_violation(_job("restricted", 2000, 500))
    assert container.name == "setup"
    assert message == validate_task_topology_policy("restricted", _dicts(2000), _dicts(500), task_index=1)


def test_the_message_names_the_failing_task_of_a_manifest():
    def task(cpu):
        return {"topologyPolicy": "restricted",
                "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu}}}]}}}

    assert validate_job_tasks([task("1"), task("2")]) == ""
    assert validate_job_tasks([task("1"), task("2"), task("1500m")]) == (
        "the cpu request isn't an integer in spec.task[2] container[0].")


def test_no_cpu_request_counts_as_zero_cpus():
    """guaranteedCPUs reads a missing cpu quantity as 0: the webhook refuses it (not a parse error),
    and the plugin gives that container no CPU hints."""
    assert guaranteed_cpus(None) == 0
    memory_only = [{"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}]
    assert validate_task_topology_policy("best-effort", memory_only) == (
        "the cpu request isn't an integer in spec.task[0] container[0].")
    pod = Pod("p", (Container("c", {"memory": GiB}, {"memory": GiB}),), qos="Guaranteed")
    task = VolcanoTask.from_pod(pod)
    assert task.containers == (("c", None),)
    model = NumaModel({0: (0, 0, 0), 1: (0, 0, 1)}, {"CPUManagerPolicy": "static",
                                                    "TopologyManagerPolicy": "best-effort"})
    verdict = predicate(task._replace(policy="best-effort"), model, 0b11)
    assert verdict.outcome == "pass_assigned" and verdict.assignment == 0
    assert verdict.containers[0].hints is None  # the CPU provider gave no map


def test_status_qos_class_is_returned_as_is():
    guaranteed = [Container.guaranteed("c", 2000, GiB)]
    assert pod_qos(guaranteed) == "Guaranteed"
    assert pod_qos(guaranteed, (), "BestEffort") == "BestEffort"
    assert pod_qos(guaranteed, (), "") == "Guaranteed"  # empty status: computed from resources
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources: {limits: {cpu: "2", memory: 1Gi}}
status: {qosClass: Burstable}
"""
    job = load_jobs(manifest)[0]
    assert job.tasks[0].template.qos_class == "Burstable"
    with pytest.raises(RequestError, match=r"status.qosClass 'Sometimes' is not one of"):
        load_jobs(manifest.replace("Burstable", "Sometimes"))
