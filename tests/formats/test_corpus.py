"""Every input file of the real-topology corpus imports and matches INDEX.json wherever it gives a value."""

import json
import pathlib

import pytest

from scheduler_core.cpuset import CPUSet
from scheduler_core.errors import FormatError
from scheduler_core.formats import detect_format, load

DATA = pathlib.Path(__file__).parent / "data"
INDEX = json.loads((DATA / "INDEX.json").read_text())
INPUTS = [e for e in INDEX if (e["format"] != "hwloc-console" and e["threads"] is not None) or
          e["format"] in ("cpu-manager-state", "memory-manager-state")]
DETECTED = {"nrt-crd": "nrt", "numatopo-crd": "numatopo"}
DEVICE_KINDS = ("gpu", "coproc", "network", "openfabrics")


def test_every_input_file_is_covered():
    files = {e["file"] for e in INPUTS}
    skipped = [e["file"] for e in INDEX if e["file"] not in files and e["format"] != "hwloc-console"]
    # the only input file left out is the Numatopology CRD schema, which has its own test below
    assert skipped == ["k8s/volcano/nodeinfo.volcano.sh_numatopologies.crd.yaml"]
    assert len(INPUTS) == 63


@pytest.mark.parametrize("entry", INPUTS, ids=[e["file"] for e in INPUTS])
def test_matches_index(entry):
    path = DATA / entry["file"]
    loaded = load(path)
    t = loaded.topology
    fmt = DETECTED.get(entry["format"], entry["format"])
    assert loaded.format == fmt
    assert detect_format(path) == fmt
    h = t.header

    if entry["sockets"] is not None:
        packages = loaded.extra.get("packages")
        assert (len(packages) if packages is not None else h.num_sockets) == entry["sockets"]
        assert h.num_sockets == len({t.cpu_info[c].socket for c in t.cpu_info})
    if entry["cores"] is not None:
        assert h.num_cores == entry["cores"]
    if entry["threads"] is not None and h.num_cpus != entry["threads"]:
        # lscpu's CPU(s) and a dump's present CPUs count offline CPUs too
        assert h.num_cpus + len(t.offline_cpus) == entry["threads"]
        assert fmt in ("lscpu-text", "sysfs-tar")
    if entry["numa_nodes"] is not None:
        if entry["numa_nodes"] == 0:
            assert t.numa_ids == (0,) and "numa_nodes" in loaded.inferred
        elif len(t.numa_ids) + len(loaded.dropped_numa) != entry["numa_nodes"]:
            assert "numa_nodes" in loaded.inferred

    if entry["cpus_per_numa"]:
        index_ids = {int(k) for k in entry["cpus_per_numa"]}
        for key, text in entry["cpus_per_numa"].items():
            nid = int(key)
            if nid in loaded.dropped_numa:
                assert CPUSet.parse(text) & t.cpuset() == CPUSet()
                continue
            assert nid in t.numa_ids
            assert CPUSet(t.numa_cpus[nid]) == CPUSet.parse(text) & t.cpuset()
        extra_nodes = set(t.numa_ids) - index_ids
        if extra_nodes:
            assert "numa_nodes" in loaded.inferred
            assert all(t.numa_node(n).memory == 0 for n in extra_nodes)

    dist = entry["numa_distances"]
    if dist:
        ids = dist["node_ids"]
        assert t.distances is not None
        for i, a in enumerate(ids):
            for j, b in enumerate(ids):
                if a in t.numa_ids and b in t.numa_ids:
                    assert t.distance(a, b) == dist["matrix"][i][j], (a, b)

    for dev in entry["devices_with_numa"] or ():
        want = None if dev.get("numa_nodes") is None else tuple(int(x) for x in dev["numa_nodes"].split(","))
        if "capacity" in dev:  # NRT: per-zone device counts
            n = want[0]
            got = [d for d in t.devices if d.resource == dev["name"] and d.numa == (n,)]
            assert len(got) == dev["capacity"]
        elif dev["kind"] == "gpu-memory-numa":
            assert set(want) <= set(loaded.dropped_numa)
        elif any(k in dev["kind"] for k in DEVICE_KINDS):
            match = [d for d in t.devices if d.name == dev["name"]]
            assert match and match[0].numa == want, dev["name"]
            assert match[0].resource.startswith("hwloc/")

    if entry["format"] in ("lscpu-parse", "numactl-hardware", "nrt-crd"):
        assert loaded.inferred, "what the format cannot say must be flagged"


def test_numatopology_crd_schema_is_refused_clearly():
    with pytest.raises(FormatError, match="CustomResourceDefinition"):
        load(DATA / "k8s/volcano/nodeinfo.volcano.sh_numatopologies.crd.yaml")


def test_hwloc_memory_sizes_and_hugepages():
    loaded = load(DATA / "hwloc-xml/v2/24em64t-2n6c2t-pci.xml")
    t = loaded.topology
    assert [n.memory for n in t.numa_nodes] == [19316633600, 19327348736]
    assert all("hugepages-2Mi" in n.hugepages for n in t.numa_nodes)
    # the uncore is the L3 cache, distinct per package here
    assert len(t.uncore_cpus) == 2


def test_hwloc_offline_cpus_come_from_complete_cpuset():
    t = load(DATA / "hwloc-xml/v2/16em64t-4s2c2t-offlines.xml").topology
    assert t.offline_cpus == CPUSet.parse("2,5,7-11,13-14")


def test_hwloc_restricted_export_keeps_orphan_cpus_on_inferred_nodes():
    loaded = load(DATA / "hwloc-xml/v2/16amd64-8n2c-cpusets.xml")
    t = loaded.topology
    assert "numa_nodes" in loaded.inferred and "distances" in loaded.inferred
    assert CPUSet(t.numa_cpus[0]) == CPUSet.parse("0-1")
    assert t.numa_node(0).memory == 0


def test_hwloc_device_locality_spans_two_numa_nodes():
    t = load(DATA / "hwloc-xml/v3/40intel64-2g2n4c+pcilocality.xml").topology
    qib = next(d for d in t.devices if d.name == "qib0")
    assert qib.numa == (1, 3) and qib.resource == "hwloc/openfabrics"


def test_sysfs_bulldozer_modules_are_two_cores_and_core_ids_are_unique():
    t = load(DATA / "hwloc-sysfs/64amd64-4s2n4ca2co.tar.bz2").topology
    assert t.header.num_cores == 64 and t.threads_per_core == 1
    assert [n.memory for n in t.numa_nodes][5] == 8388608 * 1024
    assert all(c.core == c.id for c in t.cpus)


def test_sysfs_folder_imports_like_the_tarball(tmp_path):
    import tarfile

    with tarfile.open(DATA / "lscpu/util-linux/x86_64-64cpu.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    from_dir = load(tmp_path)
    from_tar = load(DATA / "lscpu/util-linux/x86_64-64cpu.tar.gz")
    assert from_dir.format == "sysfs" and from_tar.format == "sysfs-tar"
    assert from_dir.topology == from_tar.topology


def test_sysfs_distance_row_over_possible_nodes():
    loaded = load(DATA / "hwloc-sysfs/offline-cpu0-node0.tar.bz2")
    t = loaded.topology
    assert t.distance(1, 0) == 21 and t.distance(1, 1) == 10
    assert CPUSet(t.numa_cpus[0]) == CPUSet.parse("4-20:2")  # via cpuN/node0 links, node0 itself missing
    assert t.offline_cpus == CPUSet.parse("0-3,21-23")


def test_lscpu_stride_and_sparse_nodes():
    t = load(DATA / "lscpu/util-linux/lscpu-x86_64-64cpu").topology
    assert t.numa_ids == (0, 2, 3)
    assert CPUSet(t.numa_cpus[2]) == CPUSet.parse("1-61:4")


def test_nrt_kubelet_policy_and_reserved():
    loaded = load(DATA / "k8s/nrt/scheduler-plugins-worker-node-A.yaml")
    k = loaded.kubelet
    assert (k.topology_manager_policy, k.topology_manager_scope) == ("single-numa-node", "container")
    assert k.reserved_cpus == CPUSet.parse("0,4")
    assert {"cpus", "cores", "sockets"} <= set(loaded.inferred)


def test_numatopology_omitted_zero_fields():
    loaded = load(DATA / "k8s/volcano/numatopo-node5-kubectl-excerpt.yaml")
    t = loaded.topology
    assert t.cpu_info[0].socket == 0 and t.cpu_info[3].socket == 1
    assert t.cpu_info[3].core == 3 and t.cpu_info[2].core == 2  # per-socket core ids made unique
    assert loaded.kubelet.topology_manager_policy == "none"


def test_kubelet_state_files_as_allocations():
    from scheduler_core.formats import load_allocations

    v2 = load_allocations(DATA / "k8s/kubelet/k8s-test-cpu_manager_state-v2-entries.json")
    assert {(a.pod, a.container, str(a.cpus)) for a in v2} == {("pod", "container1", "4-6"),
                                                              ("pod", "container2", "1-3")}
    v1 = load_allocations(DATA / "k8s/kubelet/k8s-test-cpu_manager_state-v1-containerid-entries.json")
    assert {(a.container, str(a.cpus)) for a in v1} == {("containerID1", "4-6"), ("containerID2", "1-3")}
    assert load_allocations(DATA / "k8s/kubelet/k8s-test-cpu_manager_state-v1-checksum-no-entries.json") == []
    both = load_allocations(DATA / "k8s/kubelet/k8s-test-cpu_manager_state-v2-entries.json",
                            DATA / "k8s/kubelet/k8s-test-memory_manager_state-static.json")
    c1 = next(a for a in both if a.container == "container1")
    assert str(c1.cpus) == "4-6" and c1.memory == {0: {"memory": 512}} and c1.origin == "imported"
    loaded = load(DATA / "k8s/kubelet/k8s-test-cpu_manager_state-v2-entries.json")
    assert loaded.extra["checksum"] == 3610638499 and loaded.extra["layout"] == "v2"
