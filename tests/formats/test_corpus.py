"""Every input file of the real-topology corpus imports and matches INDEX.json wherever it gives a value."""

import json
import pathlib

import pytest

from scheduler_core.errors import FormatError
from scheduler_core.formats import detect_format, load
from scheduler_core.model.cpuset import CPUSet

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
        else:  # hwloc: every OS device, of any kind, is kept in extra["os_devices"]
            rec = next((r for r in loaded.extra["os_devices"] if r["name"] == dev["name"]), None)
            assert rec is not None, dev["name"]
            assert (None if rec["numa"] is None else tuple(rec["numa"])) == want, dev["name"]
            assert (rec["pci_busid"], rec["subtype"]) == (dev["pci_busid"], dev["subtype"]), dev["name"]
            assert set(rec["kinds"]) == set(dev["kind"].split("+")) and rec["kind"] in rec["kinds"]
            if rec["kind"] in DEVICE_KINDS:  # and it belongs to the engine device of its PCI function
                owner = next(d for d in t.devices if d.id == rec["device"])
                assert owner.numa == want and dev["name"] in owner.name
                assert owner.id == (dev["pci_busid"] or dev["name"])
            else:
                assert rec["device"] is None
    if fmt == "hwloc-xml":
        listed = sorted(d["name"] for d in entry["devices_with_numa"] or ())
        assert sorted(r["name"] for r in loaded.extra["os_devices"]) == listed
        assert sorted(d.id for d in t.devices) == sorted({r["device"] for r in loaded.extra["os_devices"]
                                                          if r["device"] is not None})
        assert ("device_resources" in loaded.inferred) == bool(t.devices)

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
    qib = next(d for d in t.devices if d.id == "0000:43:00.0")
    # QLogic InfiniBand (class 0c06) with ib0 + qib0: one RDMA device on the Group's two nodes
    assert qib.numa == (1, 3) and qib.resource == "hwloc/rdma" and qib.name == "QLogic device 7322 (ib0, qib0)"
    assert [d.resource for d in t.devices].count("hwloc/nic") == 4


def _devices(path: str) -> dict[str, tuple[str, tuple[int, ...] | None, str]]:
    return {d.id: (d.resource, d.numa, d.name) for d in load(DATA / path).topology.devices}


def test_hwloc_gpu_os_devices_become_one_device_per_gpu():
    loaded = load(DATA / "hwloc-xml/v2/power8gpudistances.xml")
    devs = loaded.topology.devices
    assert [(d.id, d.resource, d.numa) for d in devs] == [
        ("0002:01:00.0", "nvidia.com/gpu", (0,)), ("0003:01:00.0", "nvidia.com/gpu", (0,)),
        ("000a:01:00.0", "nvidia.com/gpu", (1,)), ("000b:01:00.0", "nvidia.com/gpu", (1,))]
    assert devs[0].name == "NVIDIA Corporation Tesla P100-SXM2-16GB (cuda0, nvml0, opencl0d0)"
    assert "device_resources" in loaded.inferred
    # the 12 OS devices stay visible, each pointing at its GPU
    recs = loaded.extra["os_devices"]
    assert len(recs) == 12
    assert {r["name"]: r["device"] for r in recs if r["pci_busid"] == "000b:01:00.0"} == {
        "cuda3": "000b:01:00.0", "opencl0d3": "000b:01:00.0", "nvml3": "000b:01:00.0"}
    assert next(r for r in recs if r["name"] == "nvml2") == {
        "name": "nvml2", "kind": "gpu", "kinds": ["gpu"], "subtype": "NVML", "pci_busid": "000a:01:00.0",
        "numa": [1], "device": "000a:01:00.0"}


def test_hwloc_nics_and_rdma_with_their_numa():
    assert _devices("hwloc-xml/v2/24em64t-2n6c2t-pci.xml") == {
        "0000:04:00.0": ("hwloc/nic", (0,), "Intel Corporation 82576 Gigabit Network Connection (eth0)"),
        "0000:04:00.1": ("hwloc/nic", (0,), "Intel Corporation 82576 Gigabit Network Connection (eth1)"),
        "0000:05:00.0": ("hwloc/rdma", (0,), "Mellanox Technologies device 6746 (eth2, ib0, mlx4_0)")}
    four = _devices("hwloc-xml/v2/96em64t-4n4d3ca2co-pci.xml")
    nics = {k: v[1] for k, v in four.items() if v[0] == "hwloc/nic"}
    assert nics == {"0000:02:00.0": (0,), "0000:02:00.1": (0,), "0000:32:00.0": (1,), "0000:32:00.1": (1,),
                    "0000:62:00.0": (2,), "0000:62:00.1": (2,), "0000:92:00.0": (3,), "0000:92:00.1": (3,)}
    # the onboard ATI display chip (class 0300, vendor 1002) follows the vendor rule
    assert four["0000:01:00.0"] == ("amd.com/gpu", (0,), "ATI Technologies Inc ES1000 (card0)")


def test_hwloc_mixed_gpu_slot_and_infiniband_class():
    devs = _devices("hwloc-xml/v2/32em64t-2n8c2t-pci-normalio.xml")
    assert {k: v[0] for k, v in devs.items()} == {
        "0000:81:00.0": "hwloc/nic", "0000:81:00.1": "hwloc/nic", "0000:84:00.0": "nvidia.com/gpu",
        "0000:84:00.1": "amd.com/gpu", "0000:04:00.0": "hwloc/rdma"}
    assert devs["0000:84:00.0"][2].endswith("(card0, cuda0)")
    # v1 file without nodesets: a two-port InfiniBand HCA (class 0c06) is one device, no NUMA affinity
    v1 = _devices("hwloc-xml/v1/8em64t-2p2ca2co-nonodesets.v1.xml")
    assert v1["0000:0a:00.0"] == ("hwloc/rdma", None, "Mellanox device 634a (ib0, ib1, mlx4_0)")
    assert [v[0] for v in v1.values()].count("hwloc/nic") == 2


def test_hwloc_sr_iov_functions_stay_separate():
    loaded = load(DATA / "hwloc-xml/v2/16intel64-manyVFs.xml")
    devs = {d.id: (d.resource, d.numa) for d in loaded.topology.devices}
    # one device per PCI function with an OS device: the two I350 ports apart, each VIC PF (eth + usnic)
    # one RDMA device; the VIC's "Userspace NIC" virtual functions have no OS device, so no device
    assert devs == {"0000:02:00.0": ("hwloc/nic", (0,)), "0000:02:00.1": ("hwloc/nic", (0,)),
                    "0000:0b:00.0": ("hwloc/rdma", (0,)), "0000:0c:00.0": ("hwloc/rdma", (0,)),
                    "0000:88:00.0": ("hwloc/rdma", (1,)), "0000:89:00.0": ("hwloc/nic", (1,))}
    text = (DATA / "hwloc-xml/v2/16intel64-manyVFs.xml").read_text()
    assert text.count('type="PCIDev"') == 18 and "0000:0b:00.1" not in devs


def test_hwloc_v3_names_from_the_longer_pci_type():
    loaded = load(DATA / "hwloc-xml/v3/32em64t-2n8c+dax+nvme+mic+dimms.xml")
    devs = {d.id: (d.resource, d.numa, d.name) for d in loaded.topology.devices}
    assert devs == {"0000:02:00.0": ("hwloc/nic", (0,), "Intel device 1521 (eth0)"),
                    "0000:02:00.3": ("hwloc/nic", (0,), "Intel device 1521 (eth1)"),
                    "0000:82:00.0": ("hwloc/rdma", (1,), "Mellanox device 1003 (ib0, mlx4_0)")}
    recs = {r["name"]: r for r in loaded.extra["os_devices"]}
    assert len(recs) == 30 and recs["mlx4_0"]["kinds"] == ["openfabrics", "network"]
    assert recs["dax0.0"]["kinds"] == ["storage", "memory"] and recs["dax0.0"]["device"] is None


@pytest.mark.parametrize(("pci_type", "kinds", "resource"), [
    ("0302 [10de:15f9] [10de:116b] a1", {"coproc", "gpu"}, "nvidia.com/gpu"),
    ("0300 [1002:6798] [174b:e208] 00 00", {"coproc"}, "amd.com/gpu"),
    ("0380 [8086:56a0] [8086:1020] 08", {"gpu"}, "gpu.intel.com/i915"),
    ("1200 [1da3:1000] [0000:0000] 01 00", {"coproc"}, "hwloc/gpu"),
    ("0302 [1a03:2000] [0000:0000] 00", {"gpu"}, "hwloc/gpu"),
    ("0207 [15b3:1013] [15b3:0013] 00", {"network", "openfabrics"}, "hwloc/rdma"),
    ("0200 [8086:1521] [1028:0000] 01 00", {"network"}, "hwloc/nic"),
    ("0c06 [1077:7322] [1077:7322] 02", {"network"}, "hwloc/nic"),
    ("0b40 [8086:2250] [8086:2500] 11", {"coproc"}, "hwloc/coproc"),
    ("0b40 [8086:2250] [8086:2500] 11", {"coproc", "openfabrics"}, "hwloc/openfabrics"),
    ("", {"gpu", "network"}, "hwloc/gpu"),
    ("garbage", {"network"}, "hwloc/network"),
    ("0302", {"coproc"}, "hwloc/gpu"),
])
def test_device_resource_rule(pci_type, kinds, resource):
    from scheduler_core.formats.hwloc_devices import device_resource, parse_pci_type

    cls, vendor, _ = parse_pci_type(pci_type)
    assert device_resource(cls, vendor, kinds) == resource


def test_parse_pci_type_forms():
    from scheduler_core.formats.hwloc_devices import parse_pci_type

    assert parse_pci_type("0302 [10de:15F9] [10de:116b] a1") == (0x0302, "10de", "15f9")
    assert parse_pci_type("0200 [8086:1521] [1028:0000] 01 00") == (0x0200, "8086", "1521")
    assert parse_pci_type(None) == (None, None, None)
    assert parse_pci_type("zz [10de:1]") == (None, None, None)


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
