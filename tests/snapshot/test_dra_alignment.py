"""DRA in a snapshot import: the devices of two drivers that publish the NUMA node under different names, pods
whose allocated claims hold them, some off the NUMA node of their pinned CPUs. Every misalignment is found (the
API's `misaligned` filter, every pod row's `alignment`) and drawn (the node page, the pod's page, the cluster
map), none invented: the expected set is computed here from the objects' own fields (the claims' results, the
slices' attributes, the Numatopology's cpuDetail) and the CPUs the import pinned."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from itertools import combinations

import pytest
import yaml

from numaweb.inventory import dra, services
from numaweb.inventory.models import Allocation, Cluster, DraClaim, DraDevice, Node, PodAlignment
from numaweb.inventory.snapshot import import_snapshot
from scheduler_core.model.cpuset import CPUSet
from tests.dra.objects import (
    GPU_DRIVER,
    NIC_DRIVER,
    claim,
    device,
    device_class,
    exactly,
    gpu_node_slices,
    numatopology_node,
    pod_with_claims,
    resource_slice,
)

pytestmark = pytest.mark.django_db

KIND_OF_DRIVER = {GPU_DRIVER: "gpu", NIC_DRIVER: "nic"}  # the drivers' own names say the kind
#: (pod, node, its devices as (driver, device)), created in this order (the replay pins CPUs in it)
PODS = [
    ("train-a", "n1", [(GPU_DRIVER, "gpu-0"), (NIC_DRIVER, "eth0")]),
    ("train-b", "n1", [(GPU_DRIVER, "gpu-1"), (NIC_DRIVER, "eth1")]),
    ("train-c", "n2", [(GPU_DRIVER, "gpu-2"), (NIC_DRIVER, "eth1")]),
    ("train-d", "n2", [(GPU_DRIVER, "gpu-3"), ("accel.example.com", "x0")]),
    ("plain", "n3", []),
    ("solo", "n4", [(GPU_DRIVER, "gpu-2")]),
]


def snapshot_objects(gpu_numa: dict[str, list[int]] | None = None) -> list[dict]:
    """Four nodes of 2 NUMA nodes × 4 CPUs; on n1, n2 and n4 4 GPUs (`gpu.example.com/numaNode`) and 2 NICs
    (`dra.net/numaNode`) on the NUMA nodes given, plus on n2 a device whose driver states no NUMA node; each pod
    asks 4 CPUs (a NUMA node's worth) and holds its devices through one allocated claim."""
    gpu_numa = gpu_numa or {"n1": [0, 0, 1, 1], "n2": [1, 1, 0, 1], "n4": [0, 1, 1, 1]}
    nic_numa = {"n1": [0, 0], "n2": [0, 1], "n4": [0, 1]}
    objs: list[dict] = [*numatopology_node("n3", cpus_per_numa=4), device_class("any")]
    for node in ("n1", "n2", "n4"):
        objs += numatopology_node(node, cpus_per_numa=4)
        objs += gpu_node_slices(node, gpu_numa[node], nic_numa[node])
    objs.append(resource_slice("n2-accel", "accel.example.com", "n2", [device("x0", model="X")]))
    for i, (pod, node, devices) in enumerate(PODS):
        pools = [(driver, node, name) for driver, name in devices]
        if devices:
            objs.append(claim(f"{pod}-claim", [exactly("devs", "any", len(devices))], reserved_for=[pod],
                              results=[("devs", *p) for p in pools]))
        obj = pod_with_claims(pod, node, {"devs": f"{pod}-claim"} if devices else {}, cpus=4)
        obj["metadata"]["creationTimestamp"] = f"2026-11-20T10:0{i}:00Z"
        objs.append(obj)
    return objs


def as_yaml(objs: list[dict]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs})


def _numa_attribute(attributes: dict) -> int | None:
    """A device's NUMA node under whichever name its driver publishes it (the slices above use `numaNode`)."""
    for name, value in attributes.items():
        if name.split("/")[-1] in ("numaNode", "numa", "numaNodeID"):
            return int(value["int"])
    return None


def expected_kinds(objs: list[dict], cluster: Cluster) -> dict[str, list[str]]:
    """Per pod using devices, the misalignment kinds, from the objects' fields and the CPUs the import pinned."""
    numa_of_cpu = {(o["metadata"]["name"], int(c)): d["numa"] for o in objs if o["kind"] == "Numatopology"
                   for c, d in o["spec"]["cpuDetail"].items()}
    device_numa = {(o["spec"]["driver"], o["spec"]["nodeName"], d["name"]): _numa_attribute(d["attributes"])
                   for o in objs if o["kind"] == "ResourceSlice" for d in o["spec"]["devices"]}
    claims = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ResourceClaim"}
    out: dict[str, list[str]] = {}
    for pod in (o for o in objs if o["kind"] == "Pod"):
        refs = [r["resourceClaimName"] for r in pod["spec"]["resourceClaims"]]
        if not refs:
            continue
        node, name = pod["spec"]["nodeName"], pod["metadata"]["name"]
        held = [(KIND_OF_DRIVER.get(r["driver"], "other"), device_numa[(r["driver"], r["pool"], r["device"])])
                for ref in refs for r in claims[ref]["status"]["allocation"]["devices"]["results"]]
        mask = 0
        for a in Allocation.objects.filter(cluster=cluster, pod=f"ml/{name}"):
            mask |= CPUSet.parse(a.cpus).mask
        cpu_numa = {numa_of_cpu[(node, c)] for c in CPUSet(mask)}
        known = [(kind, numa) for kind, numa in held if numa is not None]
        kinds = {f"{kind}-cpu" for kind, numa in known if cpu_numa and numa not in cpu_numa}
        kinds |= {"-".join(sorted((a[0], b[0]), reverse=True)) for a, b in combinations(known, 2) if a[1] != b[1]}
        out[f"ml/{name}"] = sorted(kinds)
    return out


@pytest.fixture
def imported():
    cluster = Cluster.objects.create(name="gpus")
    objs = snapshot_objects()
    import_snapshot(cluster, as_yaml(objs))
    return cluster, objs


def test_every_misalignment_found_none_invented(imported, viewer_api):
    cluster, objs = imported
    expected = expected_kinds(objs, cluster)
    misaligned = {pod: kinds for pod, kinds in expected.items() if kinds}
    assert misaligned and len(misaligned) < len(expected)  # the snapshot has both, or the test proves nothing
    body = viewer_api.get(f"/api/pods/?cluster={cluster.pk}&misaligned=true").json()
    assert body["count"] == len(misaligned)
    assert {r["pod"]: r["alignment"] for r in body["results"]} == {
        pod: {"aligned": False, "kinds": kinds} for pod, kinds in misaligned.items()}
    aligned = viewer_api.get(f"/api/pods/?cluster={cluster.pk}&misaligned=false").json()
    assert {r["pod"] for r in aligned["results"]} == {p for p, kinds in expected.items() if not kinds}
    # every pod row carries alignment, the pods without DRA devices aligned with no kinds
    rows = {r["pod"]: r for r in viewer_api.get(f"/api/pods/?cluster={cluster.pk}&q=ml/").json()["results"]}
    assert rows["ml/plain"]["alignment"] == {"aligned": True, "kinds": []} and rows["ml/plain"]["dra"] is None
    for pod, kinds in expected.items():
        assert rows[pod]["alignment"] == {"aligned": not kinds, "kinds": kinds}
    report = cluster.__class__.objects.get(pk=cluster.pk).last_import["dra"]
    assert report["misaligned"] == sorted(misaligned) and report["devices"] == DraDevice.objects.count() == 19


def test_devices_read_with_their_numa_source_and_holder(imported):
    cluster, _objs = imported
    devices = {d.name: d for d in DraDevice.objects.filter(cluster=cluster, node__name="n2")}
    assert (devices["gpu-0"].numa, devices["gpu-0"].numa_source) == (1, f"attribute {GPU_DRIVER}/numaNode")
    assert (devices["eth1"].numa, devices["eth1"].numa_source, devices["eth1"].kind) == (
        1, "attribute dra.net/numaNode", "nic")
    assert (devices["x0"].numa, devices["x0"].numa_source) == (None, "unknown")
    assert (devices["gpu-2"].pod, devices["gpu-2"].claim) == ("ml/train-c", "ml/train-c-claim")
    assert devices["gpu-1"].pod == ""  # no claim holds it
    assert DraClaim.objects.get(cluster=cluster, name="train-c-claim").allocation == [
        {"request": "devs", "driver": GPU_DRIVER, "pool": "n2", "device": "gpu-2"},
        {"request": "devs", "driver": NIC_DRIVER, "pool": "n2", "device": "eth1"}]
    # a device of unknown NUMA node makes no kind, and the detail says it was not checked
    d = PodAlignment.objects.get(cluster=cluster, name="train-d")
    assert "NUMA node unknown" in d.detail


def test_node_page_draws_devices_in_their_numa_boxes(imported, viewer_client):
    cluster, objs = imported
    expected = expected_kinds(objs, cluster)
    for node in Node.objects.filter(cluster=cluster):
        page = viewer_client.get(f"/nodes/{node.pk}/").content.decode()
        grid = page[page.index('id="grid"'):page.index('id="cpu-detail"')]
        # each NUMA box's chips, in document order: the box opens, its label, then its device strip
        drawn: dict[str, tuple[str, str]] = {}
        for numa, strip in re.findall(r'data-numa="(\d+)"[^>]*><span class="lbl">[^<]*</span>'
                                      r'<ul class="dra-devs"[^>]*>(.*?)</ul>', grid):
            for key, pod in re.findall(r'data-dra="([^"]+)" data-numa="\d*" data-pod="([^"]*)"', strip):
                drawn[html.unescape(key)] = (numa, pod)
        unknown = grid[grid.index('aria-label="DRA devices on NUMA unknown"'):] if node.name == "n2" else ""
        for d in DraDevice.objects.filter(node=node):
            key = f"{d.driver}/{d.pool}/{d.name}"
            if d.numa is None:
                assert f'data-dra="{key}"' in unknown
            else:
                assert drawn[key] == (str(d.numa), d.pod)
        for pod, kinds in expected.items():
            on_node = PodAlignment.objects.get(cluster=cluster, namespace="ml", name=pod[3:]).node_id == node.pk
            shown = f'data-pod="{pod}">{pod}</a> ({", ".join(kinds)})' in page
            assert shown == (on_node and bool(kinds)), (node.name, pod)


def test_pod_page_cluster_map_and_search(imported, viewer_client):
    cluster, objs = imported
    expected = expected_kinds(objs, cluster)
    for pod, kinds in expected.items():
        row = PodAlignment.objects.get(cluster=cluster, namespace="ml", name=pod[3:])
        page = viewer_client.get(f"/pods/dra/{row.pk}/").content.decode()
        assert f'data-kinds="{" ".join(kinds)}"' in page
        assert ('class="badge misaligned">misaligned' in page) == bool(kinds)
        for d in row.devices:
            assert f'data-device="{d["driver"]}/{d["pool"]}/{d["name"]}"' in page
    holding = {PodAlignment.objects.get(cluster=cluster, name=p[3:]).node_id for p, k in expected.items() if k}
    page = viewer_client.get(f"/clusters/{cluster.pk}/map").content.decode()
    # the map's marks are drawn by its static script from the page's data: each group's misaligned-pod counts
    data = json.loads(re.search(r'<script id="cluster-map-data" type="application/json">(.*?)</script>', page,
                                re.S).group(1))
    marked = {int(pk) for g in data["groups"] for pk, off in g["misaligned"].items() if off}
    assert marked == holding
    search = viewer_client.get(f"/pods/?cluster={cluster.pk}&misaligned=true").content.decode()
    assert set(re.findall(r'<tr data-pod="([^"]+)"', search)) == {p for p, k in expected.items() if k}


def test_reimport_changes_nothing_and_a_moved_device_is_seen(imported):
    cluster, objs = imported
    generations = dict(Node.objects.filter(cluster=cluster).values_list("name", "generation"))
    ids = set(PodAlignment.objects.values_list("pk", flat=True))
    report = import_snapshot(cluster, as_yaml(objs))
    assert not report["changed"] and not report["dra"]["changed"]
    assert dict(Node.objects.filter(cluster=cluster).values_list("name", "generation")) == generations
    assert set(PodAlignment.objects.values_list("pk", flat=True)) == ids
    # gpu-0 of n1 now says NUMA 1: only n1 changes, and train-a's alignment is judged again
    moved = snapshot_objects({"n1": [1, 0, 1, 1], "n2": [1, 1, 0, 1], "n4": [0, 1, 1, 1]})
    report = import_snapshot(cluster, as_yaml(moved))
    assert report["nodes_updated"] == {"n1": ["dra devices"]} and report["dra"]["nodes_changed"] == ["n1"]
    after = dict(Node.objects.filter(cluster=cluster).values_list("name", "generation"))
    assert after["n1"] == generations["n1"] + 1 and after["n2"] == generations["n2"]
    expected = expected_kinds(moved, cluster)
    assert {p.pod: p.kinds for p in PodAlignment.objects.filter(cluster=cluster)} == expected
    assert expected["ml/train-a"] != expected_kinds(objs, cluster)["ml/train-a"]


@pytest.mark.parametrize("query", ["misaligned=yes", "misaligned=", "misaligned=true&cluster=0"])
def test_bad_misaligned_queries_are_400_naming_the_parameter(imported, viewer_api, query):
    response = viewer_api.get(f"/api/pods/?{query}")
    field = "cluster" if "cluster" in query else "misaligned"
    assert response.status_code == 400 and field in response.json(), response.content


@pytest.mark.parametrize("query", ["misaligned=true&status=rejected", "misaligned=false&status=rejected",
                                   "misaligned=true&cluster=999999"])
def test_misaligned_queries_that_can_match_nothing_answer_an_empty_list(imported, viewer_api, query):
    """Valid by the schema, so answered: a rejected pod holds no device, and an unknown cluster has no pods."""
    response = viewer_api.get(f"/api/pods/?{query}")
    assert response.status_code == 200 and response.json() == {"count": 0, "results": []}, response.content


def test_dry_run_reports_and_writes_nothing(viewer_api):
    cluster = Cluster.objects.create(name="preview")
    report = import_snapshot(cluster, as_yaml(snapshot_objects()), dry_run=True)
    assert report["dra"]["devices"] == 19 and report["dra"]["misaligned"]
    assert not DraDevice.objects.exists() and not PodAlignment.objects.exists() and not DraClaim.objects.exists()


def test_the_kubelets_own_pinning_judges_the_pods_again(imported):
    """A node agent's report or a state file replaces the replay's CPUs (here: train-a and train-b swap NUMA
    nodes on n1); `dra.realign`, which both call, judges the node's DRA pods again against them."""
    cluster, objs = imported
    node = Node.objects.get(cluster=cluster, name="n1")
    before = expected_kinds(objs, cluster)
    rows = {a.pod: a for a in Allocation.objects.filter(node=node)}
    a_cpus, b_cpus = rows["ml/train-a"].cpus, rows["ml/train-b"].cpus
    Allocation.objects.filter(pk=rows["ml/train-a"].pk).update(cpus=b_cpus, origin=Allocation.OBSERVED)
    Allocation.objects.filter(pk=rows["ml/train-b"].pk).update(cpus=a_cpus, origin=Allocation.OBSERVED)
    dra.realign(node, services.topology_of(node))
    after = expected_kinds(objs, cluster)
    assert after["ml/train-a"] != before["ml/train-a"] and after["ml/train-b"] != before["ml/train-b"]
    assert {p.pod: p.kinds for p in PodAlignment.objects.filter(cluster=cluster)} == after
    assert PodAlignment.objects.get(name="train-a").aligned == (not after["ml/train-a"])


def test_schema_documents_the_filter_and_the_command_prints_the_misaligned(tmp_path, capsys):
    from django.core.management import call_command

    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out))
    pods = yaml.safe_load(out.read_text())["paths"]["/api/pods/"]["get"]["parameters"]
    misaligned = next(p for p in pods if p["name"] == "misaligned")
    assert sorted(misaligned["schema"]["enum"]) == ["false", "true"] and "DRA" in misaligned["description"]
    snap = tmp_path / "snap.yaml"
    snap.write_text(as_yaml(snapshot_objects()))
    call_command("import_cluster", str(snap), "--cluster", "gpus")
    printed = capsys.readouterr().out
    cluster = Cluster.objects.get(name="gpus")
    misaligned_pods = [p for p, kinds in expected_kinds(snapshot_objects(), cluster).items() if kinds]
    assert f"{len(misaligned_pods)} misaligned" in printed
    assert all(f"misaligned: {p}" in printed for p in misaligned_pods)


def test_the_claim_change_that_would_align_it(imported, viewer_client):
    """solo's one-driver claim has a verified change (a matchAttribute constraint on the attribute its driver
    publishes, its GPU kept on the NUMA node of its CPUs); a claim over two drivers naming the NUMA node
    differently has none, and says why."""
    cluster, objs = imported
    solo = PodAlignment.objects.get(cluster=cluster, name="solo")
    (change,) = solo.suggestions
    assert not solo.aligned and change["found"] and change["claim"] == "ml/solo-claim"
    assert change["constraint"]["matchAttribute"] == f"{GPU_DRIVER}/numaNode"
    # the GPUs of n4 on the NUMA node of solo's CPUs, from the slice's attributes; the change gets one of them
    (n4_gpus,) = [o for o in objs if o["kind"] == "ResourceSlice" and o["metadata"]["name"] == "n4-gpu"]
    beside = {d["name"] for d in n4_gpus["spec"]["devices"] if _numa_attribute(d["attributes"]) in solo.cpu_numa}
    assert [r[3] for r in change["devices"]] and {r[3] for r in change["devices"]} <= beside
    train_c = PodAlignment.objects.get(cluster=cluster, name="train-c")
    assert not train_c.aligned and not train_c.suggestions[0]["found"]
    assert "different names" in train_c.suggestions[0]["detail"]
    page = viewer_client.get(f"/pods/dra/{solo.pk}/").content.decode()
    assert 'data-claim="ml/solo-claim" data-found="true"' in page and f"matchAttribute: {GPU_DRIVER}/numaNode" in page
    assert PodAlignment.objects.get(cluster=cluster, name="train-a").suggestions == []  # aligned: none asked


def test_claim_changes_past_the_limit_say_so_and_a_reimport_changes_nothing(monkeypatch):
    cluster = Cluster.objects.create(name="limit")
    monkeypatch.setattr(dra, "SUGGEST_PODS", 1)  # of the misaligned pods in name order, the first only
    import_snapshot(cluster, as_yaml(snapshot_objects()))
    rows = list(PodAlignment.objects.filter(cluster=cluster, aligned=False).order_by("namespace", "name"))
    assert len(rows) > 1 and not rows[0].suggestions[0]["detail"].startswith("not computed")
    assert all(r.suggestions[0]["detail"].startswith("not computed: an import computes the claim changes of at "
                                                     "most 1 ") for r in rows[1:])
    assert not import_snapshot(cluster, as_yaml(snapshot_objects()))["dra"]["changed"]


TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [exactly("gpu", "gpu")]}}}}


def _pending_with_claim(name: str) -> dict:
    limits = {"cpu": "2", "memory": "1Gi"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-11-20T11:00:00Z"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "app", "image": "busybox", "resources": {
                         "limits": limits, "requests": limits, "claims": [{"name": "gpu"}]}}]},
            "status": {"phase": "Pending", "qosClass": "Guaranteed"}}


@pytest.mark.parametrize("profile", ["volcano", "aligned"])
def test_a_session_allocates_a_pending_pods_claim_and_shows_it(profile, viewer_client):
    """A pending pod's template claim is allocated by the session on its node: upstream's first free GPU
    under `volcano` (gpu-0, on NUMA 1, while the kubelet pins its CPUs on NUMA 0), a GPU beside its CPUs under
    `aligned`; the session's pod page shows the devices and the alignment."""
    from numaweb.scheduling import services as scheduling
    from numaweb.scheduling.models import Placement

    objs = [*numatopology_node("n1", cpus_per_numa=4), *gpu_node_slices("n1", [1, 0], [0]),
            device_class("gpu", f'device.driver == "{GPU_DRIVER}"'), TEMPLATE, _pending_with_claim("infer")]
    cluster = Cluster.objects.create(name=f"s-{profile}")
    import_snapshot(cluster, as_yaml(objs))
    session = scheduling.execute_session(scheduling.start_session(cluster, profile, dry_run=True).pk)
    (placement,) = Placement.objects.filter(session=session)
    numa_of = {d["name"]: _numa_attribute(d["attributes"]) for o in objs if o["kind"] == "ResourceSlice"
               for d in o["spec"]["devices"]}
    (device,) = [d for c in placement.dra["claims"] for d in c["devices"]]
    detail = objs[0]["spec"]["cpuDetail"]
    cpu_numa = {detail[str(c)]["numa"] for c in CPUSet.parse(placement.cpus)}
    gpus = [d["name"] for o in objs if o["kind"] == "ResourceSlice" and o["spec"]["driver"] == GPU_DRIVER
            for d in o["spec"]["devices"]]
    # upstream takes the first free device in the slice's order; aligned the one beside the pinned CPUs
    chosen = gpus[0] if profile == "volcano" else next(g for g in gpus if numa_of[g] in cpu_numa)
    assert (device["device"], device["numa"]) == (chosen, numa_of[chosen])
    kinds = [] if numa_of[chosen] in cpu_numa else ["gpu-cpu"]
    assert placement.dra["alignment"] == {"aligned": not kinds, "kinds": kinds}
    assert kinds or profile == "aligned"  # the two profiles differ here, or the test proves nothing
    page = viewer_client.get(f"/sessions/{session.pk}/?pod={placement.index}").content.decode()
    assert f'data-device="{GPU_DRIVER}/n1/{device["device"]}"' in page
    assert f'data-aligned="{"true" if profile == "aligned" else "false"}"' in page


def test_a_comparison_counts_misaligned_pods_per_variant_shown_and_exported(viewer_client, viewer_api):
    """Two pending pods of a NUMA node's worth of CPUs each, one template GPU claim each, on a node whose first
    GPU (slice order) sits on NUMA 1 and second on NUMA 0: upstream's NUMA-blind allocation (`volcano`) gives
    each pod the first free GPU, `aligned` the one beside its CPUs. The expectation is built from the slice's
    attributes and the CPUs each variant's kubelet pins (the engine's session records, by a session run alike)."""
    from numaweb.comparisons import services as comparisons
    from numaweb.comparisons.models import ComparisonVariant
    from numaweb.scheduling import services as scheduling
    from numaweb.scheduling.models import Placement

    pods = [_pending_with_claim(f"infer-{i}") for i in range(2)]
    for p in pods:
        for where in (p["spec"]["containers"][0]["resources"]["limits"],
                      p["spec"]["containers"][0]["resources"]["requests"]):
            where["cpu"] = "4"
    objs = [*numatopology_node("n1", cpus_per_numa=4), *gpu_node_slices("n1", [1, 0], [0]),
            device_class("gpu", f'device.driver == "{GPU_DRIVER}"'), TEMPLATE, *pods]
    cluster = Cluster.objects.create(name="cmp")
    import_snapshot(cluster, as_yaml(objs))
    numa_of = {d["name"]: _numa_attribute(d["attributes"]) for o in objs if o["kind"] == "ResourceSlice"
               and o["spec"]["driver"] == GPU_DRIVER for d in o["spec"]["devices"]}
    expected = {}
    for profile in ("volcano", "aligned"):  # the same placement as a dry-run session: its records say where
        session = scheduling.execute_session(scheduling.start_session(cluster, profile, dry_run=True).pk)
        cpus = {detail["numa"] for p in Placement.objects.filter(session=session)
                for c in CPUSet.parse(p.cpus) for detail in [objs[0]["spec"]["cpuDetail"][str(c)]]}
        assert cpus == {0, 1}  # each pod on a NUMA node of its own
        got = [(d["device"], p.cpus) for p in Placement.objects.filter(session=session)
               for c in p.dra["claims"] for d in c["devices"]]
        expected[profile] = sum(1 for device, held in got if numa_of[device] not in {
            objs[0]["spec"]["cpuDetail"][str(c)]["numa"] for c in CPUSet.parse(held)})
    assert expected["volcano"] > expected["aligned"]
    comparison = comparisons.create_comparison(cluster, comparisons.parse_variants(
        cluster, [{"profile": "volcano"}, {"profile": "aligned"}]))
    for variant in ComparisonVariant.objects.filter(comparison=comparison):
        comparisons.execute_variant(variant.pk)
    got = {v.settings["profile"]: v.metrics for v in ComparisonVariant.objects.filter(comparison=comparison)}
    assert {p: m["pods_misaligned"] for p, m in got.items()} == expected
    assert got["volcano"]["pods_with_claims"] == got["aligned"]["pods_with_claims"] == 2
    page = viewer_client.get(f"/comparisons/{comparison.pk}/").content.decode()
    assert "pods with DRA devices off their CPUs&#x27; or memory&#x27;s NUMA nodes" in page
    assert "misaligned: gpu-cpu" in page
    rows = list(csv.DictReader(io.StringIO(viewer_api.get(
        f"/api/comparisons/{comparison.pk}/export/?format=csv").content.decode())))
    assert {r["profile"]: int(r["pods_misaligned"]) for r in rows} == expected
    assert {r["profile"]: int(r["misaligned_gpu-cpu"]) for r in rows} == expected
    data = viewer_api.get(f"/api/comparisons/{comparison.pk}/export/?format=json").json()
    assert {v["profile"]: v["metrics"]["pods_misaligned"] for v in data["variants"]} == expected


def _volcano_job_with_claims(name: str, replicas: int) -> dict:
    """A pending Volcano Job whose one task (a NUMA node's worth of CPUs a pod) asks a GPU through its template."""
    limits = {"cpu": "4", "memory": "1Gi"}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"minAvailable": replicas, "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "app", "image": "busybox", "resources": {
                    "limits": limits, "requests": limits, "claims": [{"name": "gpu"}]}}]}}}]},
            "status": {"state": {"phase": "Pending"}}}


def test_a_volcano_jobs_task_template_claims_in_sessions_and_comparisons():
    """A pending Volcano Job of two pods, each a NUMA node's worth of CPUs and a GPU from the task template's
    claim, on a node whose first GPU (slice order) is on NUMA 1: a session through the web allocates each pod's
    claim (`volcano`: the first free GPU; `aligned`: the one beside its CPUs), and a comparison counts the pods
    left off their CPUs' NUMA node as those sessions' records show them."""
    from numaweb.comparisons import services as comparisons
    from numaweb.comparisons.models import ComparisonVariant
    from numaweb.scheduling import services as scheduling
    from numaweb.scheduling.models import Placement

    objs = [*numatopology_node("n1", cpus_per_numa=4), *gpu_node_slices("n1", [1, 0], [0]),
            device_class("gpu", f'device.driver == "{GPU_DRIVER}"'), TEMPLATE, _volcano_job_with_claims("train", 2)]
    cluster = Cluster.objects.create(name="vcjob")
    import_snapshot(cluster, as_yaml(objs))
    detail = objs[0]["spec"]["cpuDetail"]
    numa_of = {d["name"]: _numa_attribute(d["attributes"]) for o in objs if o["kind"] == "ResourceSlice"
               and o["spec"]["driver"] == GPU_DRIVER for d in o["spec"]["devices"]}
    misaligned = {}
    for profile in ("volcano", "aligned"):
        session = scheduling.execute_session(scheduling.start_session(cluster, profile, dry_run=True).pk)
        placements = list(Placement.objects.filter(session=session))
        assert sorted(p.pod.rsplit("/", 1)[-1] for p in placements) == ["train-worker-0", "train-worker-1"]
        devices = {p.pod: [d["device"] for c in p.dra["claims"] for d in c["devices"]] for p in placements}
        assert sorted(d for ds in devices.values() for d in ds) == sorted(numa_of)  # one GPU each, both used
        off = [p for p in placements if numa_of[devices[p.pod][0]] not in
               {detail[str(c)]["numa"] for c in CPUSet.parse(p.cpus)}]
        assert all(p.dra["alignment"]["kinds"] == ["gpu-cpu"] for p in off)
        misaligned[profile] = len(off)
    assert misaligned["volcano"] > misaligned["aligned"] == 0
    comparison = comparisons.create_comparison(cluster, comparisons.parse_variants(
        cluster, [{"profile": "volcano"}, {"profile": "aligned"}]))
    for variant in ComparisonVariant.objects.filter(comparison=comparison):
        comparisons.execute_variant(variant.pk)
    got = {v.settings["profile"]: v.metrics for v in ComparisonVariant.objects.filter(comparison=comparison)}
    assert {p: m["pods_misaligned"] for p, m in got.items()} == misaligned
    assert got["volcano"]["pods_with_claims"] == got["aligned"]["pods_with_claims"] == 2
