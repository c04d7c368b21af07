"""One way to submit a job (numaweb.jobs.submission): the same bad submission through the jobs page and through
`POST /api/jobs/` is refused on the same field with the same message, and stores nothing."""

from html import escape

import pytest
from django.urls import reverse

from numaweb.inventory.models import Cluster
from numaweb.jobs import submission
from numaweb.jobs.models import Job
from scheduler_core.errors import EngineError

GOOD = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: parity
  namespace: default
spec:
  minAvailable: 1
  priority: 0
  tasks:
    - name: t
      replicas: 1
      topologyPolicy: best-effort
      template:
        spec:
          containers:
            - name: c
              resources:
                requests: {cpu: "2", memory: 1Gi}
                limits: {cpu: "2", memory: 1Gi}
"""


def bad(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


# (what is wrong, the manifest, the field both must name)
MANIFESTS = [
    ("YAML syntax", "kind: Job\nspec: [unclosed", "manifest"),
    ("YAML indentation", "kind: Job\n  bad: [indent", "manifest"),
    ("not a job", "just some words", "manifest"),
    ("an unknown kind", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "manifest"),
    ("replicas as text", bad("replicas: 1", "replicas: two"), "manifest"),
    ("metadata as a list", bad("  name: parity\n  namespace: default\n", "  - parity\n"), "manifest"),
    ("containers as a string", bad("          containers:\n", "          containers: oops\n          x:\n"),
     "manifest"),
    ("a bad task policy", bad("topologyPolicy: best-effort", "topologyPolicy: sometimes"), "manifest"),
    ("a fractional CPU under a task policy", bad('cpu: "2", memory: 1Gi}\n                limits: {cpu: "2"',
                                                 'cpu: "1.5", memory: 1Gi}\n                limits: {cpu: "1.5"'),
     "manifest"),
    ("a quantity that is not one", bad('requests: {cpu: "2"', 'requests: {cpu: "lots"'), "manifest"),
    ("too many replicas", bad("replicas: 1", "replicas: 1000000"), "manifest"),
    ("negative replicas", bad("replicas: 1", "replicas: -3"), "manifest"),
    ("minAvailable above the replicas", bad("minAvailable: 1", "minAvailable: 5"), "manifest"),
    ("a priority beyond int32", bad("priority: 0", "priority: 1000000000000000000000000000000"), "manifest"),
    ("a bad job name", bad("name: parity", "name: Not_A_Name"), "manifest"),
    ("a job name too long", bad("name: parity", "name: " + "a" * 300), "manifest"),
    ("a bad namespace", bad("namespace: default", "namespace: UPPER"), "manifest"),
    ("a bad task name", bad("- name: t", "- name: T_1"), "manifest"),
    ("no tasks", bad("  tasks:\n", "  tasks: []\n  unused:\n"), "manifest"),
    ("two jobs", GOOD + "---\n" + bad("name: parity", "name: other"), "manifest"),
    ("too long", GOOD + "#" * submission.MAX_MANIFEST, "manifest"),
]


def page_errors(client, data: dict) -> dict[str, list[str]]:
    response = client.post(reverse("pages:jobs"), data)
    assert response.status_code == 422, response.status_code
    errors = response.context["form"].errors.get_json_data()
    html = response.content.decode()
    for messages in errors.values():
        for message in messages:
            assert escape(message["message"]) in html  # shown on the page, not only in the form
    return {"non_field_errors" if field == "__all__" else field: [m["message"] for m in messages]
            for field, messages in errors.items()}


def api_errors(api, data: dict) -> dict[str, list[str]]:
    response = api.post("/api/jobs/", data, format="json")
    assert response.status_code == 400, response.content
    return response.json()


def same_refusal(client, api, data: dict, field: str) -> str:
    """Submit `data` through both front ends: one error, on `field`, the same message; returns it."""
    page, answer = page_errors(client, data), api_errors(api, data)
    assert page == answer
    assert list(answer) == [field] and len(answer[field]) == 1, answer
    return answer[field][0]


@pytest.mark.parametrize(("what", "manifest", "field"), MANIFESTS, ids=[m[0] for m in MANIFESTS])
def test_a_bad_manifest_is_refused_alike_by_the_page_and_the_api(client, api, cluster, what, manifest, field):
    message = same_refusal(client, api, {"manifest": manifest, "cluster": cluster.pk}, field)
    assert message
    assert not Job.objects.exists()


def test_the_messages_say_what_is_wrong(client, api, cluster):
    """A few of the messages above, read: each names the problem (not a generic "invalid")."""
    def message(manifest):
        return same_refusal(client, api, {"manifest": manifest}, "manifest")

    assert "sometimes" in message(bad("topologyPolicy: best-effort", "topologyPolicy: sometimes"))
    assert "whole number of CPUs" in message(bad('cpu: "2", memory: 1Gi}\n                limits: {cpu: "2"',
                                                 'cpu: "1.5", memory: 1Gi}\n                limits: {cpu: "1.5"'))
    assert "more than the limit of 10000 replicas per task" in message(bad("replicas: 1", "replicas: 1000000"))
    assert "is not a valid name" in message(bad("name: parity", "name: Not_A_Name"))
    assert message(GOOD + "---\n" + bad("name: parity", "name: other")) == "expected one job, found 2"
    assert message(GOOD + "#" * submission.MAX_MANIFEST) == submission.MANIFEST_TOO_LONG


@pytest.mark.parametrize(("value", "words"), [
    (999999, "no cluster has the id 999999"),
    ("abc", "a cluster is given by its id, a whole number, not abc"),
    (10**30, f"no cluster has the id {10**30}"),
    ("-1", "no cluster has the id -1"),
    ("1.5", "a cluster is given by its id, a whole number, not 1.5"),
    ("9" * 5000, "no cluster has the id " + "9" * 40 + "…"),
])
def test_an_unknown_cluster_is_refused_alike(client, api, cluster, value, words):
    assert same_refusal(client, api, {"manifest": GOOD, "cluster": value}, "cluster") == words
    assert not Job.objects.exists()


def test_no_cluster_named_among_several_is_refused_alike(client, api, cluster):
    Cluster.objects.create(name="c2")
    assert "2 clusters exist" in same_refusal(client, api, {"manifest": GOOD}, "cluster")
    assert not Job.objects.exists()


def test_a_name_taken_is_refused_alike_on_the_field_that_gave_it(client, api, cluster):
    assert api.post("/api/jobs/", {"manifest": GOOD}, format="json").status_code == 201
    words = "job default/parity already exists in cluster c1"
    assert same_refusal(client, api, {"manifest": GOOD}, "manifest") == words
    fields = {"name": "parity", "cpu": "1", "memory": "1Gi"}
    assert page_errors(client, fields) == {"name": [words]}
    assert api_errors(api, {"name": "parity", "tasks": [{"name": "t", "template": {"containers": [
        {"name": "c", "requests": {"cpu": "1"}}]}}]}) == {"name": [words]}
    assert Job.objects.count() == 1


@pytest.mark.parametrize(("page", "tasks", "extra", "field", "words"), [
    ({"name": "Not_A_Name"}, [{"name": "t"}], {"name": "Not_A_Name"}, "name", "is not a valid name"),
    ({"name": "g", "replicas": "2", "min_available": "3"}, [{"name": "t", "replicas": 2}],
     {"name": "g", "min_available": 3}, "min_available", "job g: minAvailable (3) is more than its 2 replicas"),
    ({"name": "x", "namespace": "Bad_NS"}, [{"name": "t"}], {"name": "x", "namespace": "Bad_NS"}, "namespace",
     "is not a valid name"),
    ({"name": ""}, [{"name": "t"}], {}, "name", "a job needs a name (or a manifest)"),
])
def test_the_fields_both_front_ends_share_are_refused_alike(client, api, cluster, page, tasks, extra, field, words):
    """Without a manifest the page has one task's fields and the API a task list; the job's own fields are
    the same on both, and refused alike (the engine's error mapped by its field, not by its words)."""
    template = {"containers": [{"name": "c", "requests": {"cpu": "1"}}]}
    answer = api_errors(api, {**extra, "tasks": [{**t, "template": template} for t in tasks]})
    assert page_errors(client, {"cpu": "1", **page}) == answer
    assert list(answer) == [field] and words in answer[field][0], answer
    assert not Job.objects.exists()


def test_a_good_manifest_is_stored_alike(client, api, cluster):
    """The refusals are not the whole story: the same manifest is stored the same way by both."""
    assert client.post(reverse("pages:jobs"), {"manifest": GOOD}).status_code == 302
    page_job = Job.objects.get()
    assert api.post("/api/jobs/", {"manifest": bad("name: parity", "name: parity-2")},
                    format="json").status_code == 201
    api_job = Job.objects.get(name="parity-2")
    same = ("cluster_id", "namespace", "queue", "priority", "min_available", "source_format", "status")
    assert [getattr(page_job, f) for f in same] == [getattr(api_job, f) for f in same]
    assert list(page_job.tasks.values_list("name", "replicas", "topology_policy", "template")) == \
        list(api_job.tasks.values_list("name", "replicas", "topology_policy", "template"))


def test_the_jobs_page_takes_a_huge_cluster_id_as_no_choice(client, cluster):
    """`?cluster=` of 5,000 digits is no cluster (the first one is shown), not a 500 from int()."""
    response = client.get(reverse("pages:jobs") + "?cluster=" + "9" * 5000)
    assert response.status_code == 200 and f'name="cluster" value="{cluster.pk}"' in response.content.decode()


@pytest.mark.parametrize(("field", "expected"), [
    ("cpu", "cpu"), ("memory", "memory"), ("hugepages-2Mi", "memory"), ("nvidia.com/gpu", "devices"),
    ("gpu", "devices"), ("ephemeral-storage", None), ("replicas", "replicas"), ("task", "task"),
    ("topology_policy", "topology_policy"), ("min_available", "min_available"), ("priority", "priority"),
    ("name", "name"), (None, None), ("labels", "tasks"), ("annotations", "tasks"), ("pod_priority", "tasks"),
])
def test_an_engine_error_is_placed_by_its_field_never_by_its_words(field, expected):
    """The one mapping both front ends use; the message says "priority" and "minAvailable" to show that the
    words do not matter (the API once sniffed them)."""
    assert submission.field_of(EngineError("minAvailable and priority are both wrong", field)) == expected
