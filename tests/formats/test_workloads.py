"""Workload importers: Volcano Job, Pod and Deployment YAML → Job objects, with per-field errors."""

import pytest

from scheduler_core.errors import FormatError, PolicyError, RequestError
from scheduler_core.formats import detect_format, load_jobs

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: mpi
  namespace: team-a
spec:
  minAvailable: 3
  queue: research
  priority: 7
  tasks:
  - name: master
    replicas: 1
    topologyPolicy: single-numa-node
    template:
      spec:
        containers:
        - name: main
          resources:
            requests: {cpu: 2, memory: 8Gi}
            limits: {cpu: "2", memory: 8Gi, nvidia.com/gpu: 1}
  - name: worker
    replicas: 3
    template:
      metadata:
        annotations:
          volcano.sh/numa-topology-policy: best-effort
      spec:
        initContainers:
        - name: setup
          resources: {limits: {cpu: 500m, memory: 1e3}}
        - name: proxy
          restartPolicy: Always
          resources: {limits: {cpu: 100m, memory: 64Mi}}
        containers:
        - name: main
          resources:
            limits: {cpu: 1e3m, memory: 1Gi, hugepages-2Mi: 4Mi}
"""
POD = """
apiVersion: v1
kind: Pod
metadata:
  name: single
  annotations:
    volcano.sh/numa-topology-policy: restricted
spec:
  containers:
  - name: c
    resources:
      limits: {cpu: "4", memory: 4Gi}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 5
  template:
    metadata:
      annotations: {volcano.sh/numa-topology-policy: single-numa-node}
    spec:
      containers:
      - name: c
        resources: {requests: {cpu: 250m, memory: 128Mi}}
"""


def test_volcano_job():
    assert detect_format(JOB) == "workload"
    [job] = load_jobs(JOB)
    assert (job.name, job.namespace, job.queue, job.priority, job.min_available) == ("mpi", "team-a", "research", 7, 3)
    master, worker = job.tasks
    assert master.replicas == 1 and master.policy == "single-numa-node"
    main = master.template.containers[0]
    assert main.requests == {"cpu": 2000, "memory": 8 * 2**30, "nvidia.com/gpu": 1}
    assert master.template.qos_class == "Guaranteed"
    assert worker.replicas == 3 and worker.topology_policy is None and worker.policy == "best-effort"
    setup, proxy = worker.template.init_containers
    assert (setup.kind, setup.limits) == ("init", {"cpu": 500, "memory": 1000})
    assert proxy.kind == "sidecar"
    assert worker.template.containers[0].limits == {"cpu": 1000, "memory": 2**30, "hugepages-2Mi": 4 * 2**20}
    assert len(job.pods()) == 4


def test_pod_and_deployment_multi_document():
    pod_job, deploy = load_jobs(POD)
    assert pod_job.name == "single" and pod_job.tasks[0].policy == "restricted" and pod_job.min_available == 1
    assert deploy.tasks[0].replicas == 5 and deploy.min_available == 1
    assert deploy.tasks[0].policy == "single-numa-node"
    assert deploy.tasks[0].template.containers[0].requests == {"cpu": 250, "memory": 128 * 2**20}
    assert pod_job.submitted < deploy.submitted


def test_json_pod():
    [job] = load_jobs('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},'
                      '"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"2"}}}]}}')
    assert job.tasks[0].template.containers[0].limits == {"cpu": 2000}


def test_repeated_task_names():
    text = JOB.replace("name: worker", "name: master")
    with pytest.raises(RequestError, match=r"spec.tasks\[1\].name 'master' is used by an earlier task"):
        load_jobs(text)


def test_min_available_above_replicas():
    with pytest.raises(RequestError, match=r"minAvailable \(9\) is more than the 4 replicas"):
        load_jobs(JOB.replace("minAvailable: 3", "minAvailable: 9"))


def test_unknown_policy_in_task_and_annotation():
    with pytest.raises(PolicyError, match=r"spec.tasks\[0\].topologyPolicy: unknown topology policy 'single'"):
        load_jobs(JOB.replace("topologyPolicy: single-numa-node", "topologyPolicy: single"))
    with pytest.raises(PolicyError, match=r"numa-topology-policy.*'best'"):
        load_jobs(JOB.replace("numa-topology-policy: best-effort", "numa-topology-policy: best"))


@pytest.mark.parametrize(("old", "new", "match"), [
    ("replicas: 3", "replicas: -1", r"spec.tasks\[1\].replicas cannot be negative"),
    ("replicas: 3", "replicas: 2.5", r"spec.tasks\[1\].replicas must be an integer"),
    ("nvidia.com/gpu: 1", "nvidia.com/gpu: 1.5", r"limits.nvidia.com/gpu: 1.5 is not a whole number"),
    ("memory: 1e3", "memory: -1Gi", r"initContainers\[0\]: resources.limits.memory: '-1Gi' is negative"),
    ("cpu: 500m", "cpu: 0.0001", r"resources.limits.cpu: 0.0001 is finer than 1m"),
    ("cpu: 500m", "cpu: lots", r"'lots' is not a quantity"),
])
def test_bad_quantities_name_the_field(old, new, match):
    with pytest.raises(RequestError, match=match):
        load_jobs(JOB.replace(old, new, 1))


def test_not_a_volcano_job():
    with pytest.raises(FormatError, match="only Volcano Jobs"):
        load_jobs(JOB.replace("batch.volcano.sh/v1alpha1", "batch/v1"))


def test_unsupported_kind_and_empty():
    with pytest.raises(FormatError, match=r"kind 'Service' is not a Job, Pod or Deployment"):
        load_jobs("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {}\n")
    with pytest.raises(FormatError, match="no Job, Pod or Deployment"):
        load_jobs("---\n")


KOORD_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: latency}
spec:
  tasks:
  - name: server
    replicas: 2
    template:
      metadata:
        labels:
          koordinator.sh/qosClass: LSR
          app: server
        annotations:
          scheduling.koordinator.sh/resource-spec: |
            {"preferredCPUBindPolicy": "SpreadByPCPUs"}
          kubectl.kubernetes.io/last-applied-configuration: '{"kind": "Job"}'
      spec:
        priority: 9000
        containers:
        - name: main
          resources: {limits: {cpu: "2", memory: 1Gi}}
"""


def test_template_labels_annotations_and_priority_are_kept():
    """The template's metadata and spec.priority reach every replica (Koordinator reads them); kubectl's
    last-applied-configuration, a copy of the object, is left out."""
    [job] = load_jobs(KOORD_JOB)
    template = job.tasks[0].template
    assert template.label_map == {"app": "server", "koordinator.sh/qosClass": "LSR"}
    assert template.annotation_map == {
        "scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": "SpreadByPCPUs"}\n'}
    assert template.priority == 9000
    assert [(p.labels, p.annotations, p.priority) for _t, p in job.pods()] == [
        (template.labels, template.annotations, 9000)] * 2
    # a Pod and a Deployment's template too; without any, none
    [pod_job] = load_jobs(POD.split("---")[0].replace("  annotations:", "  labels: {koordinator.sh/qosClass: LSE}\n"
                                                       "  annotations:"))
    assert pod_job.tasks[0].template.label_map == {"koordinator.sh/qosClass": "LSE"}
    [plain] = load_jobs(JOB)
    assert (plain.tasks[0].template.labels, plain.tasks[0].template.priority) == ((), None)


@pytest.mark.parametrize(("old", "new", "match"), [
    ("app: server", "app: 3", r"spec.tasks\[0\].template: metadata.labels: .*label 'app': the value must be a string"),
    ("koordinator.sh/qosClass: LSR", "koordinator.sh/qosClass: [LSR]", r"metadata.labels: .*must be a string"),
    ("priority: 9000", "priority: high", r"spec.priority must be an integer, not 'high'"),
    ("priority: 9000", "priority: 2147483648", r"spec.priority: .*priority must be at most 2147483647"),
    ("        labels:\n", "        labels: [a]\n", r"metadata.labels"),
])
def test_bad_template_metadata_names_the_field(old, new, match):
    text = KOORD_JOB.replace(old, new, 1)
    if new.endswith("[a]\n"):  # the list replaces the mapping: drop its entries
        text = text.replace("          koordinator.sh/qosClass: LSR\n          app: server\n", "")
    with pytest.raises((RequestError, FormatError), match=match):
        load_jobs(text)


def test_an_annotation_with_control_characters_is_left_out_not_the_file_refused():
    """Another tool's annotation holding a zero-width joiner or an escape character does not stop the
    import; what Koordinator reads is kept."""
    text = KOORD_JOB.replace("          kubectl.kubernetes.io/last-applied-configuration: '{\"kind\": \"Job\"}'\n",
                             "          example.com/banner: \"team\\u200dx\"\n"
                             "          example.com/colour: \"\\e[31mred\"\n"
                             "          example.com/note: \"two\\nlines\"\n")
    [job] = load_jobs(text)
    assert job.tasks[0].template.annotation_map == {
        "scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": "SpreadByPCPUs"}\n',
        "example.com/note": "two\nlines"}
