"""Volcano's job webhook rule on engine Jobs agrees with the rule on manifest dicts (volcano-spec §4.1)."""

from scheduler_core import Container, Job, Pod, Task
from scheduler_core.volcano import job_topology_policy_violation, validate_task_topology_policy

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
