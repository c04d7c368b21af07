"""Job submission: the API's JSON form and Volcano Job YAML; bad input → 400 naming the field."""

import pytest

from numaweb.jobs.models import Job

VOLCANO_JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: vj-test
spec:
  schedulerName: volcano
  minAvailable: 1
  tasks:
    - replicas: 1
      name: "test"
      topologyPolicy: best-effort
      template:
        spec:
          containers:
            - image: alpine
              name: running
              resources:
                limits:
                  cpu: 20
                  memory: "100Mi"
"""


@pytest.fixture(autouse=True)
def _one_cluster(cluster):
    """A job left without a cluster goes to the only one (tests/api/test_clusters_jobs.py covers several)."""


def job_body(**extra):
    res = {"cpu": "2", "memory": "1Gi"}
    body = {"name": "j1", "tasks": [{"name": "t", "replicas": 2, "topology_policy": "single-numa-node",
                                     "template": {"containers": [{"name": "c", "requests": res, "limits": res}]}}]}
    body.update(extra)
    return body


def test_submit_json_job(api):
    r = api.post("/api/jobs/", job_body(), format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["status"] == "pending" and body["source_format"] == "json"
    task = body["tasks"][0]
    assert task["replicas"] == 2
    assert task["template"]["containers"][0]["requests"] == {"cpu": 2000, "memory": 2**30}
    assert api.get(f"/api/jobs/{body['id']}/").status_code == 200
    assert api.get("/api/jobs/999/").status_code == 404


def test_submit_volcano_yaml(api):
    r = api.post("/api/jobs/", {"manifest": VOLCANO_JOB}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["name"] == "vj-test" and body["min_available"] == 1 and body["source_format"] == "yaml"
    assert body["tasks"][0]["topology_policy"] == "best-effort"
    assert body["tasks"][0]["template"]["containers"][0]["requests"]["cpu"] == 20000


@pytest.mark.parametrize("body, field, words", [
    ({"manifest": "kind: Job\nspec: [unclosed"}, "manifest", ""),
    (job_body(tasks=[{"name": "t", "topology_policy": "sometimes",
                      "template": {"containers": [{"name": "c"}]}}]), "tasks", "sometimes"),
    (job_body(min_available=5), "min_available", "minAvailable"),
    (job_body(tasks=[{"name": "t", "topology_policy": "single-numa-node",
                      "template": {"containers": [{"name": "c", "requests": {"cpu": "1500m"},
                                                   "limits": {"cpu": "1500m"}}]}}]), "tasks", "whole number"),
    (job_body(tasks=[{"name": "t", "template": {"containers": [{"name": "c", "requests": {"cpu": "lots"}}]}}]),
     "tasks", "lots"),
    (job_body(tasks=[]), "tasks", "at least one task"),
])
def test_malformed_jobs_are_400_with_field(api, body, field, words):
    r = api.post("/api/jobs/", body, format="json")
    assert r.status_code == 400, r.content
    errors = r.json()
    assert field in errors, errors
    assert words in str(errors[field])
    assert not Job.objects.exists()


def test_yaml_fractional_cpu_under_policy(api):
    r = api.post("/api/jobs/", {"manifest": VOLCANO_JOB.replace("cpu: 20", "cpu: 1.5")}, format="json")
    assert r.status_code == 400 and "whole number" in r.json()["manifest"][0]


def test_duplicate_job_name(api):
    assert api.post("/api/jobs/", job_body(), format="json").status_code == 201
    r = api.post("/api/jobs/", job_body(), format="json")
    assert r.status_code == 400 and "already exists" in r.json()["name"][0]


def test_anonymous_cannot_submit(anon):
    assert anon.post("/api/jobs/", job_body(), format="json").status_code == 401


@pytest.mark.parametrize("policy, containers, inits, error", [
    # the engine's webhook rule: index counts app containers, then init containers
    ("single-numa-node", [{"name": "a", "requests": {"cpu": "2"}}, {"name": "b", "requests": {"cpu": "250m"}}], [],
     "container b asks for 250m CPU, but topology policy single-numa-node needs a whole number of CPUs "
     "(the cpu request isn't an integer in spec.task[1] container[1].)"),
    ("restricted", [{"name": "a", "requests": {"cpu": "2"}}], [{"name": "setup", "requests": {"cpu": "0.5"}}],
     "container setup asks for 500m CPU, but topology policy restricted needs a whole number of CPUs "
     "(the cpu request isn't an integer in spec.task[1] container[1].)"),
    # requests empty: the limits decide; no cpu at all is 0 CPUs, which is not a whole number of CPUs either
    ("best-effort", [{"name": "a", "limits": {"cpu": "1100m"}}], [], "spec.task[1] container[0]."),
    ("best-effort", [{"name": "a", "requests": {"memory": "1Gi"}}], [], "spec.task[1] container[0]."),
    ("none", [{"name": "a", "requests": {"cpu": "250m"}}], [], None),
    ("", [{"name": "a", "requests": {"cpu": "250m"}}], [], None),
])
def test_fractional_cpu_under_policy_is_the_engines_webhook_rule(api, policy, containers, inits, error):
    plain = {"name": "plain", "template": {"containers": [{"name": "p", "requests": {"cpu": "100m"}}]}}
    task = {"name": "t", "topology_policy": policy, "template": {"containers": containers, "init_containers": inits}}
    r = api.post("/api/jobs/", job_body(tasks=[plain, task]), format="json")
    if error is None:
        assert r.status_code == 201, r.content
        return
    assert r.status_code == 400, r.content
    assert r.json() == {"tasks": [r.json()["tasks"][0]]} and error in r.json()["tasks"][0]
    assert r.json()["tasks"][0].startswith("task t: ")
    assert not Job.objects.exists()


KOORD_TEMPLATE = {"labels": {"koordinator.sh/qosClass": "LSR", "app": "web"},
                  "annotations": {"scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": "FullPCPUs"}'},
                  "priority": 9000}


def test_template_labels_annotations_and_priority_round_trip(api):
    """Kept in the task's template (JSON, no new column), returned as given, and on the engine's pods."""
    from numaweb.jobs.services import engine_jobs

    body = job_body()
    body["tasks"][0]["template"].update(KOORD_TEMPLATE)
    r = api.post("/api/jobs/", body, format="json")
    assert r.status_code == 201, r.content
    template = api.get(f"/api/jobs/{r.json()['id']}/").json()["tasks"][0]["template"]
    assert {k: template[k] for k in KOORD_TEMPLATE} == KOORD_TEMPLATE
    _rows, [job] = engine_jobs(Job.objects.all())
    pod = job.pods()[1][1]
    assert (dict(pod.labels), dict(pod.annotations), pod.priority) == (
        KOORD_TEMPLATE["labels"], KOORD_TEMPLATE["annotations"], 9000)
    # a template without them stores none
    r = api.post("/api/jobs/", job_body(name="plain"), format="json")
    assert not {"labels", "annotations", "priority"} & set(r.json()["tasks"][0]["template"])


def test_manifest_template_metadata_is_stored(api):
    manifest = VOLCANO_JOB.replace("      template:\n", "      template:\n        metadata:\n"
                                   "          labels: {koordinator.sh/qosClass: LSE}\n", 1)
    manifest = manifest.replace("        spec:\n          containers:", "        spec:\n          priority: 9100\n"
                                "          containers:", 1)
    r = api.post("/api/jobs/", {"manifest": manifest}, format="json")
    assert r.status_code == 201, r.content
    template = r.json()["tasks"][0]["template"]
    assert (template["labels"], template["priority"]) == ({"koordinator.sh/qosClass": "LSE"}, 9100)


@pytest.mark.parametrize("extra, words", [
    ({"labels": {"koordinator.sh/qosClass": 5}}, "template.labels"),
    ({"labels": ["LSR"]}, "template.labels must be an object"),
    ({"labels": {"app": "a\nb"}}, "template.labels"),
    ({"annotations": {"note": {"nested": "x"}}}, "template.annotations"),
    ({"priority": "high"}, "template.priority must be an integer"),
    ({"priority": 2**31}, "template.priority"),
])
def test_bad_template_metadata_is_400_naming_the_field(api, extra, words):
    body = job_body()
    body["tasks"][0]["template"].update(extra)
    r = api.post("/api/jobs/", body, format="json")
    assert r.status_code == 400, r.content
    assert words in str(r.json()["tasks"]), r.json()
    assert not Job.objects.exists()
