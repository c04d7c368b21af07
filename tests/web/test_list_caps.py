"""Issue 37 row 7: a list in a request is capped before any of it is looked at, with a 400 (a form error, a
command's non-zero exit) naming the field: make room's `pinned` and `protected_namespaces`, and the containers
a kubelet state check replays (200,000 containers once ran 97 s and took 1.1 GB; one 15 MB `pinned` held a
worker 120.8 s)."""

from __future__ import annotations

import io
import json
import pathlib
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Cluster
from numaweb.room.models import RoomPlan
from scheduler_core.scheduler.room_moves import Rules
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = pytest.mark.django_db

SEED = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data" / "seeds"


@pytest.mark.parametrize("field", ["pinned", "protected_namespaces"])
def test_make_room_lists_over_the_cap_are_400_naming_them(api, settings, field):
    cluster = fragmented_rows(nodes=1)
    job = gang_job()
    settings.NUMAWEB_MAX_LIST_ITEMS = 3
    url = f"/api/clusters/{cluster.pk}/make-room/"
    r = api.post(url, {"job": job.pk, field: ["a/b", "c/d", "e/f", "g/h"]}, format="json")
    assert r.status_code == 400 and "4 items" in r.json()[field][0], r.content
    assert "NUMAWEB_MAX_LIST_ITEMS" in r.json()[field][0]
    r = api.post(url, {"job": job.pk, field: "a,b,c,d"}, format="json")  # the comma-separated form
    assert r.status_code == 400 and field in r.json()
    assert not RoomPlan.objects.exists()
    r = api.post(url, {"job": job.pk, field: ["a/b", "c/d", "e/f"]}, format="json")  # at the cap: taken
    assert r.status_code == 202, r.content


def test_a_15_mb_pinned_list_is_refused_at_once(api):
    cluster = fragmented_rows(nodes=1)
    pinned = ",".join(f"ns/pod-{i}*" for i in range(1_000_000))  # 15 MB, the probe
    started = time.perf_counter()
    r = api.post(f"/api/clusters/{cluster.pk}/make-room/", {"job": gang_job().pk, "pinned": pinned}, format="json")
    assert r.status_code == 400 and "1000000 items" in r.json()["pinned"][0]
    assert time.perf_counter() - started < 10
    assert not RoomPlan.objects.exists()


def test_the_command_names_its_option(settings):
    fragmented_rows("frag", nodes=1)
    gang_job("train")
    settings.NUMAWEB_MAX_LIST_ITEMS = 2
    with pytest.raises(CommandError, match=r"^--pin: 3 items"):
        call_command("make_room", "--cluster", "frag", "--job", "train", "--pin", "a", "--pin", "b", "--pin", "c",
                     stdout=io.StringIO())
    with pytest.raises(CommandError, match=r"^--protect: 3 items"):
        call_command("make_room", "--cluster", "frag", "--job", "train", "--protect", "a", "--protect", "b",
                     "--protect", "c", stdout=io.StringIO())
    assert not RoomPlan.objects.exists()


def test_pinned_patterns_match_as_shell_wildcards_did():
    rules = Rules(pinned=("team/db-0", "batch/*", "web/front-[ab]?", "ml/x.y"))
    def pinned(uid: str) -> bool:
        return rules.refusal(type("P", (), {"uid": uid, "namespace": uid.split("/")[0], "priority": 0})(), ()) \
            == "pinned"
    assert [u for u in ("team/db-0", "team/db-01", "batch/anything", "web/front-a1", "web/front-c1", "ml/x.y",
                        "ml/xzy") if pinned(u)] == ["team/db-0", "batch/anything", "web/front-a1", "ml/x.y"]


def _state(containers: int) -> bytes:
    entries = {f"pod-{i}": {"c": str(i % 64)} for i in range(containers)}
    return json.dumps({"policyName": "static", "defaultCpuSet": "", "entries": entries, "checksum": 1}).encode()


@pytest.fixture
def node():
    cluster = Cluster.objects.create(name="c")
    return inventory.import_node(cluster, "node-1", (SEED / "seed001-lscpu.txt").read_bytes(), None,
                                 {"topology_manager_policy": "single-numa-node", "reserved_cpus": "0"})


def test_check_state_with_200k_containers_is_refused_naming_the_file(api, node):
    started = time.perf_counter()
    r = api.post(f"/api/nodes/{node.pk}/check-state/",
                 {"cpu_state": SimpleUploadedFile("cpu_manager_state", _state(200_000))}, format="multipart")
    assert r.status_code == 400, r.content
    assert "200000 containers, more than the limit of 5000" in r.json()["cpu_state"][0]
    assert time.perf_counter() - started < 30  # was 97 s of replay


def test_check_state_caps_each_input_on_every_path(api, client, node, settings, tmp_path):
    settings.NUMAWEB_MAX_STATE_CONTAINERS = 3
    url = f"/api/nodes/{node.pk}/check-state/"
    r = api.post(url, {"cpu_state": SimpleUploadedFile("s", _state(4))}, format="multipart")
    assert r.status_code == 400 and "4 containers" in r.json()["cpu_state"][0]
    assert api.post(url, {"cpu_state": SimpleUploadedFile("s", _state(3))}, format="multipart").status_code == 200
    memory = {"policyName": "Static", "machineState": {}, "entries": {f"p{i}": {"c": []} for i in range(4)},
              "checksum": 1}
    r = api.post(url, {"cpu_state": SimpleUploadedFile("s", _state(1)),
                       "memory_state": SimpleUploadedFile("m", json.dumps(memory).encode())}, format="multipart")
    assert r.status_code == 400 and "4 containers" in r.json()["memory_state"][0]
    pods = "kind: List\nitems:\n" + "".join(
        f"- {{kind: Pod, metadata: {{name: p{i}, namespace: d, uid: u{i}}}, spec: {{containers: [{{name: c}}]}}}}\n"
        for i in range(4))
    r = api.post(url, {"cpu_state": SimpleUploadedFile("s", _state(1)),
                       "pods": SimpleUploadedFile("p.yaml", pods.encode())}, format="multipart")
    assert r.status_code == 400 and "4 containers" in r.json()["pods"][0]
    page = client.post(reverse("pages:node-check-state", args=[node.pk]),
                       {"cpu_state": SimpleUploadedFile("cpu_manager_state", _state(4))})
    assert page.status_code == 400 and "4 containers, more than the limit of 3" in page.content.decode()
    path = tmp_path / "cpu_manager_state"
    path.write_bytes(_state(4))
    with pytest.raises(CommandError, match="4 containers"):
        call_command("check_state", "node-1", str(path), stdout=io.StringIO())


def test_api_lists_of_jobs_variants_and_tasks_are_capped(api, settings):
    """Checked on the raw list, before any id is looked up (a list of job ids was a query per id)."""
    cluster = Cluster.objects.create(name="c")
    settings.NUMAWEB_MAX_LIST_ITEMS = 3
    ids = list(range(1, 5))
    r = api.post("/api/sessions/", {"cluster": cluster.pk, "jobs": ids}, format="json")
    assert r.status_code == 400 and r.json()["jobs"] == ["4 items, more than the limit of 3 (NUMAWEB_MAX_LIST_ITEMS)"]
    r = api.post("/api/comparisons/", {"cluster": cluster.pk, "jobs": ids, "variants": [{"profile": "aligned"}] * 4},
                 format="json")
    assert r.status_code == 400 and set(r.json()) == {"jobs", "variants"}, r.content
    task = {"name": "t", "replicas": 0, "template": {"containers": [{"name": "c"}]}}
    r = api.post("/api/jobs/", {"cluster": cluster.pk, "name": "j", "tasks": [{**task, "name": f"t{i}"}
                                                                               for i in range(4)]}, format="json")
    assert r.status_code == 400 and "4 items" in r.json()["tasks"][0], r.content
    assert api.post("/api/jobs/", {"cluster": cluster.pk, "name": "j", "tasks": [task]},
                    format="json").status_code == 201


def test_the_pages_jobs_list_is_capped(client, settings):
    cluster = Cluster.objects.create(name="c")
    settings.NUMAWEB_MAX_LIST_ITEMS = 3
    r = client.post(reverse("pages:session-start"), {"cluster": cluster.pk, "profile": "volcano", "scope": "picked",
                                                     "jobs": [1, 2, 3, 4]})
    assert r.status_code == 422 and "4 items, more than the limit of 3" in r.content.decode()


def test_check_state_reads_100k_id_cpusets_in_linear_time(api, node):
    """Issue 37 row 6: defaultCpuSet, planned reserved_cpus and reservedSystemCPUs of 100,000 ids (about 270 KB
    each) took 40.8 s each to parse; the whole check now answers in a fraction of that."""
    ids = ",".join(str(i % 4) for i in range(100_000))
    state = json.dumps({"policyName": "static", "defaultCpuSet": ids, "entries": {}, "checksum": 1}).encode()
    config = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"
              f"reservedSystemCPUs: \"{ids}\"\n").encode()
    started = time.perf_counter()
    r = api.post(f"/api/nodes/{node.pk}/check-state/", {
        "cpu_state": SimpleUploadedFile("cpu_manager_state", state),
        "kubelet_config": SimpleUploadedFile("config.yaml", config),
        "planned_settings": json.dumps({"reserved_cpus": ids})},
        format="multipart")
    assert time.perf_counter() - started < 20
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["actual_default_cpuset"] == "0-3" and body["planned_changes"]["reserved_cpus"]["planned"] == "0-3"
