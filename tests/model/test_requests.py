"""Pods, jobs, quantities and kubelet settings: the kubelet's rules and clear errors on bad input."""

import pytest

from scheduler_core import Container, Job, KubeletConfig, Pod, PolicyError, RequestError, Task
from scheduler_core.model.kubelet_config import CPUOptions, TopologyOptions
from scheduler_core.model.pods import (
    BEST_EFFORT,
    BURSTABLE,
    GUARANTEED,
    SIDECAR,
    guaranteed_cpus,
    pod_device_request,
    pod_guaranteed_cpus,
    pod_memory_request,
)
from scheduler_core.model.quantity import count, cpu_milli, format_bytes

GiB = 1 << 30


def test_qos_classes():
    g = Pod("g", (Container.guaranteed("c", 2000, GiB),))
    b = Pod("b", (Container("c", {"cpu": 1000}),))
    e = Pod("e", (Container("c"),))
    assert (g.qos_class, b.qos_class, e.qos_class) == (GUARANTEED, BURSTABLE, BEST_EFFORT)
    # limits only: requests default to limits, as the API server does
    assert Pod("l", (Container("c", limits={"cpu": 1000, "memory": GiB}),)).qos_class == GUARANTEED


def test_integer_cpu_rule():
    pod = Pod("p", (Container.guaranteed("a", 1500, GiB), Container.guaranteed("b", 2000, GiB)))
    assert [guaranteed_cpus(pod, c) for c in pod.containers] == [0, 2]
    burst = Pod("q", (Container("a", {"cpu": 2000}),))
    assert guaranteed_cpus(burst, burst.containers[0]) == 0


def test_pod_level_aggregates_with_sidecars():
    init = Container.guaranteed("init", 4000, GiB, kind="init", devices={"example.com/nic": 2})
    side = Container.guaranteed("side", 1000, GiB, kind=SIDECAR)
    app = Container.guaranteed("app", 2000, 2 * GiB, devices={"example.com/nic": 1})
    pod = Pod("p", (app,), (side, init))
    # init runs after the sidecar started: max(1+4, 2+1) = 5
    assert pod_guaranteed_cpus(pod) == 5
    assert pod_device_request(pod, "example.com/nic") == 2
    assert pod_memory_request(pod) == {"memory": 3 * GiB}
    assert [c.name for c in pod.all_containers()] == ["side", "init", "app"]


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"requests": {"cpu": -1000}}, "request cpu cannot be negative"),
    ({"requests": {"cpu": 1.5}}, "request cpu must be an integer, not 1.5"),
    ({"requests": {"cpu": 3000}, "limits": {"cpu": 2000}}, "exceeds its limit"),
    ({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}, "must be equal"),
    ({"kind": "daemon"}, "kind 'daemon'"),
])
def test_bad_container(kwargs, needle):
    with pytest.raises(RequestError, match=needle):
        Container("c", **kwargs)


def test_duplicate_container_names():
    with pytest.raises(RequestError, match="container name 'c' is used twice"):
        Pod("p", (Container("c"), Container("c")))


@pytest.mark.parametrize(("value", "milli"), [("2", 2000), ("500m", 500), (3, 3000), ("1e3", 1_000_000), ("0.5", 500)])
def test_cpu_quantities(value, milli):
    assert cpu_milli(value) == milli


@pytest.mark.parametrize(("value", "n"), [("8Gi", 8 * GiB), ("1e3", 1000), ("128974848", 128974848), ("1M", 10**6)])
def test_count_quantities(value, n):
    assert count(value) == n


@pytest.mark.parametrize(("value", "needle"), [
    ("-1", "negative"), ("abc", "not a quantity"), ("0.5", "not a whole number"), (True, "not a quantity"),
])
def test_bad_quantities(value, needle):
    with pytest.raises(RequestError, match=needle):
        count(value, "memory")


def test_format_bytes():
    assert [format_bytes(n) for n in (8 * GiB, 512 << 20, 1000)] == ["8Gi", "512Mi", "1000"]


def _task(name="t", replicas=2, policy=None):
    return Task(name, Pod("tmpl", (Container.guaranteed("c", 1000, GiB),)), replicas, policy)


def test_job_pods_and_defaults():
    job = Job("j", (_task("a", 2, "best-effort"), _task("b", 1)))
    assert job.min_available == 3
    pods = job.pods()
    assert [p.name for _, p in pods] == ["j-a-0", "j-a-1", "j-b-0"]
    assert [p.topology_policy for _, p in pods] == ["best-effort", "best-effort", None]


@pytest.mark.parametrize(("make", "exc", "needle"), [
    (lambda: Job("j", (_task("a"), _task("a"))), RequestError, "task name 'a' is used twice"),
    (lambda: Job("j", (_task("a", 2),), min_available=3), RequestError, r"minAvailable \(3\) is more than its 2"),
    (lambda: _task("a", -1), RequestError, "replicas cannot be negative: -1"),
    (lambda: _task("a", 1.5), RequestError, "replicas must be an integer"),
    (lambda: _task("a", 1, "numa-please"), PolicyError, "unknown topology policy 'numa-please'"),
    (lambda: Job("j", ()), RequestError, "at least one task"),
])
def test_bad_jobs(make, exc, needle):
    with pytest.raises(exc, match=needle):
        make()


def test_kubelet_settings_parse_like_the_kubelet():
    k = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted",
                      topology_manager_options={"prefer-closest-numa-nodes": "T", "max-allowable-numa-nodes": "16"},
                      cpu_manager_options={"full-pcpus-only": "true"}, reserved_cpus="0,32")
    assert k.topology_manager_options == TopologyOptions(True, 16)
    assert k.cpu_manager_options.full_pcpus_only
    assert str(k.reserved_cpus) == "0,32"
    assert KubeletConfig.from_dict(k.to_dict()) == k


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"topology_manager_policy": "strict"}, 'unknown policy: "strict"'),
    ({"topology_manager_scope": "node"}, 'unknown scope: "node"'),
    ({"cpu_manager_policy": "dynamic"}, 'unknown policy: "dynamic"'),
    ({"topology_manager_options": {"foo": "1"}}, 'unknown Topology Manager Policy option: "foo"'),
    ({"topology_manager_options": {"prefer-closest-numa-nodes": "yes"}}, 'bad value for option "prefer-closest'),
    ({"topology_manager_options": {"max-allowable-numa-nodes": "4"}}, "should not be less than 8"),
    ({"topology_manager_options": {"max-allowable-numa-nodes": "x"}}, "unable to convert policy option to integer"),
    ({"cpu_manager_options": {"full-pcpus-only": "true", "distribute-cpus-across-cores": "true"}},
     "can not be used at the same time"),
    ({"cpu_manager_options": {"turbo": "true"}}, 'unknown CPU Manager Policy option: "turbo"'),
])
def test_bad_kubelet_settings(kwargs, needle):
    with pytest.raises(PolicyError, match=needle):
        KubeletConfig(**kwargs)


def test_cpu_options_parse_direct():
    assert CPUOptions.parse({"align-by-socket": "1"}).align_by_socket


def test_errors_name_their_field():
    """EngineError.field says which input an error is about, so forms need not read the message."""
    from scheduler_core.errors import EngineError

    cases = [
        (lambda: cpu_milli("lots"), "cpu"),
        (lambda: count("1.5", "limits.nvidia.com/gpu", "nvidia.com/gpu"), "nvidia.com/gpu"),
        (lambda: Container("c", {"memory": -1}), "memory"),
        (lambda: _task("a", -1), "replicas"),
        (lambda: _task("a", 1, "numa-please"), "topology_policy"),
        (lambda: Job("j", (_task("a", 1),), min_available=2), "min_available"),
        (lambda: Job("", (_task("a", 1),)), "name"),
    ]
    for make, field in cases:
        with pytest.raises(EngineError) as info:
            make()
        assert info.value.field == field, (field, str(info.value))


def test_pod_metadata_is_kept_sorted_and_read_only_and_replicas_carry_it():
    c = (Container.guaranteed("c", 1000, GiB),)
    pod = Pod("p", c, labels={"b": "2", "a": "1"}, annotations=(("x", '{\n  "k": "v"\n}\n'),), priority=9000)
    assert pod.labels == (("a", "1"), ("b", "2")) and pod.label_map == {"a": "1", "b": "2"}
    assert pod.annotation_map["x"].startswith("{\n")  # a JSON annotation written as a YAML block
    with pytest.raises(TypeError):
        pod.label_map["a"] = "3"  # type: ignore[index]
    assert hash(pod.labels) == hash(Pod("q", c, labels={"a": "1", "b": "2"}).labels)
    assert Pod("e", c, labels={}).labels == ()
    job = Job("j", (Task("t", pod, 2),))
    replica = job.pod(job.tasks[0], 1)
    assert (replica.name, replica.labels, replica.annotations, replica.priority) == (
        "j-t-1", pod.labels, pod.annotations, 9000)


@pytest.mark.parametrize("kwargs, field, needle", [
    ({"labels": {"a": 1}}, "labels", "label 'a': the value must be a string, not 1"),
    ({"labels": {"": "x"}}, "labels", "keys must be non-empty strings"),
    ({"labels": {"a": "x\ny"}}, "labels", "label 'a': the value holds the character '\\n'"),
    ({"labels": {"a\tb": "x"}}, "labels", "label key 'a\\tb' holds the character"),
    ({"labels": ["a"]}, "labels", "must be (key, value) pairs"),
    ({"labels": "a=b"}, "labels", "must be an object of key: value strings, not str"),
    ({"labels": (("a", "1"), ("a", "2"))}, "labels", "label 'a' is given twice"),
    ({"annotations": {"a": "x\x1by"}}, "annotations", "holds the character '\\x1b'"),
    ({"annotations": {"a": ["x"]}}, "annotations", "the value must be a string"),
    ({"priority": "9000"}, "pod_priority", "priority must be an integer, not '9000'"),
    ({"priority": True}, "pod_priority", "priority must be an integer"),
    ({"priority": 2**31}, "pod_priority", "priority must be at most 2147483647"),
    ({"priority": -(2**31) - 1}, "pod_priority", "priority must be at least -2147483648"),
])
def test_bad_pod_metadata_names_its_field(kwargs, field, needle):
    with pytest.raises(RequestError) as err:
        Pod("p", (Container("c"),), **kwargs)
    assert needle in str(err.value) and err.value.field == field
