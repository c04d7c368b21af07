"""Will the kubelet start? The refusals operators meet after changing a node's kubelet configuration, built
the way they meet them (the checkpoints the kubelet wrote under the old settings, the new config.yaml), each
with the kubelet's text and the next step — through `manage.py check_state`, the node page and the API — and
the node's settings taken from / written to its KubeletConfiguration."""

import dataclasses
import html
import io
import json

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from numaweb.inventory import services
from numaweb.inventory.models import Allocation, Node
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.kubelet.kubelet_start import CPU_STATE_FILE, MEMORY_STATE_FILE, model_checkpoints
from scheduler_core.model.pods import Container, Pod
from tests.web.helpers import make_node

pytestmark = pytest.mark.django_db
GIB = 1 << 30
HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def _written_by_the_kubelet(node: Node, pods: int = 2) -> tuple[str, str | None]:
    """Pods admitted by the node's kubelet model, stored as the node's allocations, and the checkpoints
    the kubelet wrote for them."""
    engine = services.to_engine(node, ())
    for i in range(pods):
        pod = Pod(f"p{i}", (Container.guaranteed("app", cpu_milli=2000, memory=GIB),), uid=f"team/p{i}")
        result = admit_pod(engine, pod)
        assert result.admitted
        held = {a.container: a for a in result.allocations}
        a = held.get("app")  # under the none policy the pod runs in the shared pool and holds nothing
        memory = {str(n): r for n, r in a.memory.items()} if a else {}
        Allocation.objects.create(node=node, cluster=node.cluster, pod=pod.uid, container="app",
                                  cpus=str(a.cpus) if a else "", memory=memory)
    return model_checkpoints(engine)


@dataclasses.dataclass
class Scenario:
    node: Node
    cpu: str
    memory: str | None
    config: str
    message: str
    file: str
    pinned: list


def _none_to_static(cluster) -> Scenario:
    node = make_node(cluster, "n-none", cpu_manager_policy="none", policy="none")
    cpu, _ = _written_by_the_kubelet(node)
    config = HEAD + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"
    message = ('start cpu manager error: could not restore state from checkpoint: configured policy "static" differs '
               'from state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint '
               f'file "{CPU_STATE_FILE}" before restarting Kubelet')
    return Scenario(node, cpu, None, config, message, CPU_STATE_FILE, [])


def _reserved_0_to_0_1(cluster) -> Scenario:
    node = make_node(cluster, "n-reserved", policy="none", reserved_cpus="0")
    cpu, _ = _written_by_the_kubelet(node)
    assert "1" in json.loads(cpu)["entries"]["team/p0"]["app"].split("-")[0]  # a pod holds CPU 1
    config = HEAD + "cpuManagerPolicy: static\nreservedSystemCPUs: 0-1\n"
    message = 'start cpu manager error: not all reserved cpus: "0-1" are present in defaultCpuSet: "0,5-7"'
    return Scenario(node, cpu, None, config, message, CPU_STATE_FILE, ["team/p0", "team/p1"])


def _reserved_memory_changed(cluster) -> Scenario:
    node = make_node(cluster, "n-memory", policy="single-numa-node", reserved_cpus="0",
                     memory_manager_policy="Static", reserved_memory={"0": {"memory": GIB}})
    cpu, memory = _written_by_the_kubelet(node)
    config = HEAD + ("cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ntopologyManagerPolicy: single-numa-node\n"
                     "memoryManagerPolicy: Static\nsystemReserved: {memory: 1948Mi}\n"
                     "reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}, {numaNode: 1, limits: {memory: 1Gi}}]\n")
    message = "start memory manager error: [memorymanager] the expected machine state is different from the real one"
    return Scenario(node, cpu, memory, config, message, MEMORY_STATE_FILE, ["team/p0", "team/p1"])


SCENARIOS = {"checkpoint written under none, config now static": _none_to_static,
             "reservedSystemCPUs 0 -> 0-1 with pods pinned": _reserved_0_to_0_1,
             "Memory Manager reserved memory changed": _reserved_memory_changed}


@pytest.fixture(params=list(SCENARIOS))
def scenario(request, cluster) -> Scenario:
    return SCENARIOS[request.param](cluster)


@pytest.fixture
def cluster(db):
    from numaweb.inventory.models import Cluster

    return Cluster.objects.create(name="prod")


def _files(s: Scenario, tmp_path) -> list[str]:
    paths = {"cpu": tmp_path / "cpu_manager_state", "config": tmp_path / "config.yaml"}
    paths["cpu"].write_text(s.cpu)
    paths["config"].write_text(s.config)
    args = ["--cpu-state", str(paths["cpu"]), "--kubelet-config", str(paths["config"])]
    if s.memory is not None:
        (tmp_path / "memory_manager_state").write_text(s.memory)
        args += ["--memory-state", str(tmp_path / "memory_manager_state")]
    return args


def test_the_files_are_taken_under_the_settings_that_wrote_them(scenario, tmp_path, capsys):
    args = _files(scenario, tmp_path)
    try:  # no planned config: the node's own settings; under none the model has nothing to compare (exit 3)
        call_command("check_state", scenario.node.name, *args[:2], *args[4:])
    except SystemExit as exc:
        assert exc.code == 3 and scenario.node.cpu_manager_policy == "none"
    out = capsys.readouterr().out
    assert "kubelet start: starts" in out
    if scenario.node.cpu_manager_policy == "static":
        assert "verdict: all 2 containers match" in out


def test_the_command_says_the_refusal_and_the_next_step(scenario, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        call_command("check_state", scenario.node.name, *_files(scenario, tmp_path))
    assert exc.value.code == 4
    out = capsys.readouterr().out
    assert f"kubelet start: REFUSES: the kubelet refuses to start: {scenario.message}\n" in out
    assert "next step: drain the node" in out and f"delete {scenario.file}" in out
    assert "planned change:" in out
    if scenario.pinned:
        assert f"pinned pods that leave the node: {', '.join(scenario.pinned)}" in out


def test_the_api_says_the_refusal_and_the_next_step(scenario, operator_api):
    files = {"cpu_state": scenario.cpu, "kubelet_config": scenario.config}
    if scenario.memory is not None:
        files["memory_state"] = scenario.memory
    data = {k: _named(v, k) for k, v in files.items()}
    r = operator_api.post(f"/api/nodes/{scenario.node.pk}/check-state/", data, format="multipart")
    assert r.status_code == 200, r.content
    start = r.json()["start"]
    assert not start["starts"]
    assert start["refusal"]["message"] == scenario.message and start["refusal"]["file"] == scenario.file
    assert start["refusal"]["action"].startswith("drain the node") and f"delete {scenario.file}" in \
        start["refusal"]["action"]
    assert start["pods_to_move"] == scenario.pinned
    assert r.json()["pods_on_node"] == ["team/p0", "team/p1"] and r.json()["planned_changes"]


def test_the_page_says_the_refusal_and_the_next_step(scenario, operator_client):
    files = {"cpu_state": scenario.cpu, "kubelet_config": scenario.config}
    if scenario.memory is not None:
        files["memory_state"] = scenario.memory
    data = {k: SimpleUploadedFile(k, v.encode()) for k, v in files.items()}
    response = operator_client.post(reverse("pages:node-check-state", args=[scenario.node.pk]), data)
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert 'data-starts="false"' in page and "No: the kubelet refuses to start" in page
    assert f'<pre class="kubelet-text">{scenario.message}</pre>' in page
    assert "What to do:</strong> drain the node" in page and f"delete {scenario.file}" in page
    for pod in scenario.pinned:
        assert f'<code class="pod-to-move">{pod}</code>' in page


def _named(text: str, name: str) -> io.BytesIO:
    fh = io.BytesIO(text.encode())
    fh.name = name
    return fh


def test_a_bad_planned_config_is_a_400_naming_the_field(operator_api, operator_client, cluster, tmp_path):
    s = _none_to_static(cluster)
    bad = HEAD + "cpuManagerPolicy: static\ncpuManagerPolicyOptions: {turbo: 'true'}\n"
    (tmp_path / "cpu").write_text(s.cpu)
    (tmp_path / "config.yaml").write_text(bad)
    with pytest.raises(CommandError, match='cpuManagerPolicyOptions: unknown CPU Manager Policy option: "turbo"'):
        call_command("check_state", s.node.name, "--cpu-state", str(tmp_path / "cpu"),
                     "--kubelet-config", str(tmp_path / "config.yaml"))
    r = operator_api.post(f"/api/nodes/{s.node.pk}/check-state/",
                          {"cpu_state": _named(s.cpu, "c"), "kubelet_config": _named(bad, "k")}, format="multipart")
    assert r.status_code == 400
    assert 'cpuManagerPolicyOptions: unknown CPU Manager Policy option: "turbo"' in r.json()["kubelet_config"][0]
    page = operator_client.post(reverse("pages:node-check-state", args=[s.node.pk]),
                                {"cpu_state": SimpleUploadedFile("c", s.cpu.encode()),
                                 "kubelet_config": SimpleUploadedFile("k", bad.encode())})
    assert page.status_code == 400 and "turbo" in html.unescape(page.content.decode())


# -- node settings from and to a KubeletConfiguration -------------------------------------------------

CONFIG = HEAD + ("cgroupDriver: systemd\ncpuManagerPolicy: static\nkubeReserved: {cpu: 500m}\n"
                 "systemReserved: {cpu: 1}\ntopologyManagerPolicy: restricted\ntopologyManagerScope: pod\n"
                 "topologyManagerPolicyOptions: {prefer-closest-numa-nodes: 'true'}\n")


def test_api_sets_the_settings_from_a_config_and_exports_them(api, cluster):
    node = make_node(cluster, "n1")
    r = api.post(f"/api/nodes/{node.pk}/kubelet-config/", {"file": _named(CONFIG, "config.yaml")}, format="multipart")
    assert r.status_code == 200, r.content
    node.refresh_from_db()
    assert (node.topology_manager_policy, node.topology_manager_scope, node.reserved_cpu_milli) == \
        ("restricted", "pod", 1500)
    assert node.topology_manager_options == {"prefer-closest-numa-nodes": "true"}
    exported = api.get(f"/api/nodes/{node.pk}/kubelet-config/")
    assert exported.status_code == 200 and exported["Content-Type"] == "application/yaml"
    doc = yaml.safe_load(exported.content)
    assert doc["kind"] == "KubeletConfiguration" and doc["topologyManagerScope"] == "pod"
    again = api.post(f"/api/nodes/{node.pk}/kubelet-config/", {"file": _named(exported.content.decode(), "c.yaml")},
                     format="multipart")
    assert again.status_code == 200
    node.refresh_from_db()
    assert services.kubelet_of(node).to_dict()["reserved_cpu_milli"] == 1500


def test_api_refuses_a_bad_config_naming_the_field(api, operator_api, cluster):
    node = make_node(cluster, "n1")
    r = api.post(f"/api/nodes/{node.pk}/kubelet-config/", {"file": _named(HEAD + "topologyManagerScope: node\n", "c")},
                 format="multipart")
    assert r.status_code == 400 and "topologyManagerScope" in r.json()["file"][0]
    node.refresh_from_db()
    assert node.topology_manager_scope == "container"
    assert operator_api.post(f"/api/nodes/{node.pk}/kubelet-config/", {"file": _named(CONFIG, "c")},
                             format="multipart").status_code == 403


def test_settings_that_no_longer_fit_the_allocations_change_nothing(api, cluster):
    node = make_node(cluster, "n1", reserved_cpus="0")
    Allocation.objects.create(node=node, cluster=cluster, pod="team/p0", container="app", cpus="1-2")
    config = HEAD + "cpuManagerPolicy: static\nreservedSystemCPUs: 0-1\n"
    r = api.post(f"/api/nodes/{node.pk}/kubelet-config/", {"file": _named(config, "c")}, format="multipart")
    assert r.status_code == 400 and "CPUs 1" in r.json()["file"][0]
    node.refresh_from_db()
    assert node.reserved_cpus == "0"


def test_page_takes_the_settings_from_a_config(client, cluster):
    node = make_node(cluster, "n1")
    page = client.get(reverse("pages:node", args=[node.pk])).content.decode()
    assert 'id="kubelet-config-form"' in page and "Download as config.yaml" in page
    r = client.post(reverse("pages:node-kubelet-config", args=[node.pk]),
                    {"file": SimpleUploadedFile("config.yaml", CONFIG.encode())})
    assert r.status_code == 302
    node.refresh_from_db()
    assert node.topology_manager_policy == "restricted"
    download = client.get(reverse("pages:node-kubelet-config", args=[node.pk]))
    assert b"topologyManagerPolicy: restricted" in download.content
    bad = client.post(reverse("pages:node-kubelet-config", args=[node.pk]),
                      {"file": SimpleUploadedFile("config.yaml", (HEAD + "nope: 1\n").encode())})
    assert bad.status_code == 400 and 'unknown field "nope"' in html.unescape(bad.content.decode())


def test_import_topology_takes_the_settings_from_a_config(tmp_path, capsys, db):
    topo = tmp_path / "node-7.txt"
    topo.write_text("pack:2 core:4 pu:2\n")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    call_command("import_topology", str(topo), "--cluster", "c1", "--kubelet-config", str(config))
    node = Node.objects.get(name="node-7")
    assert (node.topology_manager_policy, node.reserved_cpu_milli) == ("restricted", 1500)
    config.write_text(HEAD + "bogus: 1\n")
    with pytest.raises(CommandError, match='unknown field "bogus"'):
        call_command("import_topology", str(topo), "--cluster", "c1", "--kubelet-config", str(config))


# -- a planned change typed in rather than uploaded ---------------------------------------------------

def test_planned_settings_typed_in_on_the_page_and_through_the_api(operator_client, operator_api, cluster):
    s = _reserved_0_to_0_1(cluster)
    r = operator_api.post(f"/api/nodes/{s.node.pk}/check-state/",
                          {"cpu_state": _named(s.cpu, "c"), "planned_settings": '{"reserved_cpus": "0-1"}'},
                          format="multipart")
    assert r.status_code == 200, r.content
    assert r.json()["start"]["refusal"]["message"] == s.message
    assert r.json()["planned_changes"] == {"reserved_cpus": {"node": "0", "planned": "0-1"}}
    page = operator_client.post(reverse("pages:node-check-state", args=[s.node.pk]),
                                {"cpu_state": SimpleUploadedFile("c", s.cpu.encode()), "reserved_cpus": "0-1"})
    text = html.unescape(page.content.decode())
    assert page.status_code == 200 and f'<pre class="kubelet-text">{s.message}</pre>' in text
    assert "<code>reserved_cpus</code> 0 → 0-1" in text
    bad = operator_api.post(f"/api/nodes/{s.node.pk}/check-state/",
                            {"cpu_state": _named(s.cpu, "c"), "planned_settings": '{"topology_manager_scope": "node"}'},
                            format="multipart")
    assert bad.status_code == 400 and 'unknown scope: "node"' in bad.json()["planned_settings"][0]
    bad_page = operator_client.post(reverse("pages:node-check-state", args=[s.node.pk]),
                                    {"cpu_state": SimpleUploadedFile("c", s.cpu.encode()), "reserved_cpus": "3-1"})
    assert bad_page.status_code == 400 and "3-1" in html.unescape(bad_page.content.decode())
    outside = operator_client.post(reverse("pages:node-check-state", args=[s.node.pk]),
                                   {"cpu_state": SimpleUploadedFile("c", s.cpu.encode()), "reserved_cpus": "0-99"})
    assert "reserved-cpus: 0-99 is not a subset of online-cpus: 0-7" in html.unescape(outside.content.decode())
