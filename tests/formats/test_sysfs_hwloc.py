"""The sysfs reader against hwloc's own test suite: real machines' sysfs dumps (tests/hwloc/linux/ of
open-mpi/hwloc, BSD-3-Clause) with what lstopo prints for them (`.console`, or the `.xml` hwloc exports),
compared on CPUs per NUMA node, cores, packages, memory and each PCI device's NUMA locality."""

from __future__ import annotations

import pathlib
import re
import tarfile

import pytest
from defusedxml import ElementTree

from scheduler_core.formats import load
from scheduler_core.formats.sysfs import load_host
from scheduler_core.model.bitmask import bits_of

DATA = pathlib.Path(__file__).parent / "data" / "hwloc-linux"
#: PCI classes hwloc keeps (lstopo's default "important" filter), bridges left out
IMPORTANT_BASES = {0x00, 0x01, 0x02, 0x03, 0x0B, 0x12}
IMPORTANT_CLASSES = {0x0C04, 0x0C06, 0x0502}
LINE = re.compile(r"^( *)([A-Za-z][A-Za-z0-9]*)(?:\[[^\]]*\])?(?:\([^)]*\))? *(?:L#\d+)? *(?:\((.*)\))?")


class Obj:
    """One object of lstopo's tree: its type, its attribute text, parent and children."""

    def __init__(self, kind: str, attrs: str, parent: Obj | None) -> None:
        self.kind, self.attrs, self.parent = kind, attrs, parent
        self.children: list[Obj] = []

    def attr(self, name: str) -> str:
        return re.search(rf"(?:^| ){name}=(\S+)", self.attrs).group(1)

    @property
    def os_index(self) -> int:
        return int(re.search(r"P#(\d+)", self.attrs).group(1))


def console_tree(path: pathlib.Path) -> list[Obj]:
    """Every object `lstopo -v` printed, with its parent (by indentation); the summary after is not read."""
    objects: list[Obj] = []
    stack: list[tuple[int, Obj]] = []
    for line in path.read_text().splitlines():
        if re.match(r"^ *depth \d|^Special depth", line):
            break
        m = LINE.match(line)
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        obj = Obj(m.group(2), m.group(3) or "", stack[-1][1] if stack else None)
        if obj.parent is not None:
            obj.parent.children.append(obj)
        objects.append(obj)
        stack.append((indent, obj))
    return objects


def console_locality(obj: Obj) -> set[int]:
    """The NUMA nodes of an I/O object as lstopo places it: those of its first ancestor holding NUMA nodes."""
    at = obj.parent
    while at is not None and not any(c.kind == "NUMANode" for c in at.children):
        at = at.parent
    return {c.os_index for c in at.children if c.kind == "NUMANode"} if at is not None else set()


def pus_below(obj: Obj) -> set[int]:
    found, todo = set(), [obj]
    while todo:
        o = todo.pop()
        found |= {c.os_index for c in o.children if c.kind == "PU"}
        todo.extend(o.children)
    return found


CONSOLES = ["2pa-pcidomain32bits", "32intel64-2p8co2t+8ve", "16ia64-8n2s", "2arm-2c"]


@pytest.mark.parametrize("name", CONSOLES)
def test_sysfs_dump_matches_lstopo(name):
    objects = console_tree(DATA / f"{name}.console")
    loaded = load(DATA / f"{name}.tar.bz2")
    t = loaded.topology
    numas = [o for o in objects if o.kind == "NUMANode"]
    # CPUs per NUMA node: the PUs below each NUMA node's parent
    assert {n: {c.id for c in t.cpus if c.numa == n} for n in t.numa_ids} == {
        n.os_index: pus_below(n.parent) for n in numas}
    assert t.header.num_cores == sum(1 for o in objects if o.kind == "Core")
    assert t.header.num_sockets == sum(1 for o in objects if o.kind == "Package")
    # memory: lstopo prints it rounded (MiB or GiB); ours agrees within that rounding
    for numa in numas:
        local = re.search(r"local=(\d+)(MiB|GiB)", numa.attrs)
        unit = 1 << (20 if local.group(2) == "MiB" else 30)
        got = t.numa_node(numa.os_index).memory
        assert abs(got - int(local.group(1)) * unit) <= unit, (numa.os_index, got)
    # PCI devices: the important ones lstopo shows, each with lstopo's NUMA locality (none: every node)
    pcis = {o.attr("busid"): o for o in objects if o.kind == "PCI"}
    assert {d.id for d in t.devices} == set(pcis)
    every = set(t.numa_ids)
    for device in t.devices:
        where = console_locality(pcis[device.id])
        assert (set(device.numa) if device.numa else every) == where, device
    assert all(pcis[d.id].attr("class")[:4] in d.name for d in t.devices)


def test_sysfs_dump_devices_match_hwloc_xml_export():
    """A machine with NICs, NVMe, InfiniBand, a Xeon Phi and a VGA: every PCI function of hwloc's
    --whole-io export is read, and the important ones are devices with hwloc's NUMA locality."""
    loaded = load(DATA / "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2")
    t = loaded.topology
    root = ElementTree.parse(DATA / "32em64t-2n8c+dax+nvme+mic+dimms.xml").getroot()
    parents = {child: parent for parent in root.iter("object") for child in parent}
    expected: dict[str, tuple[int, set[int]]] = {}
    for obj in root.iter("object"):
        if obj.get("type") != "PCIDev":
            continue
        at = parents.get(obj)
        while at is not None and at.get("nodeset") is None:
            at = parents.get(at)
        nodes = set(bits_of(int(at.get("nodeset").replace(",", ""), 16))) if at is not None else set()
        expected[obj.get("pci_busid")] = (int(obj.get("pci_type")[:4], 16), nodes)
    listed = {p["bus_id"]: p for p in loaded.extra["pci_devices"]}
    assert set(expected) <= set(listed)
    for bus_id, (cls, _nodes) in expected.items():
        assert int(listed[bus_id]["class"], 16) == cls
    important = {b for b, (cls, _n) in expected.items()
                 if cls >> 8 in IMPORTANT_BASES - {0x06} or cls in IMPORTANT_CLASSES}
    assert {d.id for d in t.devices} == important
    every = set(t.numa_ids)
    for device in t.devices:
        assert (set(device.numa) if device.numa else every) == expected[device.id][1], device
    kinds = {d.id: d.resource for d in t.devices}
    assert kinds["0000:82:00.0"] == "hwloc/rdma" and kinds["0000:02:00.0"] == "hwloc/nic"
    assert kinds["0000:83:00.0"] == "hwloc/coproc" and kinds["0000:00:02.0"] == "hwloc/storage"
    assert "device_resources" in t.inferred


def test_infiniband_functions_are_rdma_and_co_processors_coproc():
    t = load(DATA / "32intel64-2p8co2t+8ve.tar.bz2").topology
    kinds = {d.id: d.resource for d in t.devices}
    assert kinds["0000:1a:00.0"] == kinds["0000:3e:00.0"] == "hwloc/rdma"  # class 0207 (InfiniBand)
    assert kinds["0000:1b:00.0"] == "hwloc/coproc" and kinds["0000:60:00.0"] == "hwloc/nic"


def test_16ia64_has_sixteen_one_cpu_packages_not_eight():
    """Every CPU's physical_package_id is 0 or 512, but each package mask names one CPU: 16 packages."""
    t = load(DATA / "16ia64-8n2s.tar.bz2").topology
    assert t.header.num_sockets == 16
    assert sorted(c.socket for c in t.cpus) == list(range(16))


def _unpack(tmp_path: pathlib.Path, name: str) -> pathlib.Path:
    with tarfile.open(DATA / f"{name}.tar.bz2") as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / name


def test_memory_from_proc_meminfo_without_numa_folders(tmp_path):
    """2arm-2c has no node folders: lstopo reads 274 MiB from /proc/meminfo, and so does the reader."""
    root = _unpack(tmp_path, "2arm-2c")
    assert not (root / "sys/devices/system/node/node0").exists()
    assert load(root).topology.numa_node(0).memory == 280840 * 1024
    (root / "proc/meminfo").write_text("MemTotal:  1024 kB\nHugePages_Total:  3\nHugepagesize:  2048 kB\n")
    node = load(root).topology.numa_node(0)
    assert node.memory == 1024 * 1024 and node.hugepages == {"hugepages-2Mi": 3 * 2048 * 1024}


def test_thread_siblings_from_core_cpus_alone(tmp_path):
    """A kernel that writes only the `core_cpus` map (no *_list, no thread_siblings): two threads a core."""
    cpu = tmp_path / "sys/devices/system/cpu"
    (cpu / "online").parent.mkdir(parents=True)
    (cpu / "online").write_text("0-3\n")
    for c in range(4):
        topo = cpu / f"cpu{c}/topology"
        topo.mkdir(parents=True)
        (topo / "core_cpus").write_text(f"{0b11 << (c // 2 * 2):x}\n")
        (topo / "core_id").write_text("0\n")  # the same everywhere: only core_cpus tells the cores apart
        (topo / "physical_package_id").write_text("0\n")
    t = load(tmp_path).topology
    assert t.header.num_cores == 2 and [c.core for c in t.cpus] == [0, 0, 2, 2]


def test_live_machine_pci_devices(tmp_path):
    """A live-style tree: `bus/pci/devices` links into `devices/pci*`, a GPU on node 1, a NIC without a node."""
    sys_dir = tmp_path / "sys"
    for c, node in ((0, 0), (1, 1)):
        (sys_dir / f"devices/system/cpu/cpu{c}/topology").mkdir(parents=True)
        (sys_dir / f"devices/system/cpu/cpu{c}/topology/physical_package_id").write_text(f"{node}\n")
        (sys_dir / f"devices/system/node/node{node}").mkdir(parents=True)
        (sys_dir / f"devices/system/node/node{node}/cpulist").write_text(f"{c}\n")
    (sys_dir / "devices/system/cpu/online").write_text("0-1\n")
    (sys_dir / "bus/pci/devices").mkdir(parents=True)
    for bus_id, cls, vendor, numa in (("0000:3b:00.0", "0x030200", "0x10de", "1"),
                                      ("0000:00:03.0", "0x020000", "0x8086", "-1"),
                                      ("0000:00:00.0", "0x060000", "0x8086", "-1")):
        dev = sys_dir / f"devices/pci0000:00/{bus_id}"
        dev.mkdir(parents=True)
        for fname, value in (("class", cls), ("vendor", vendor), ("device", "0x1234"), ("numa_node", numa)):
            (dev / fname).write_text(value + "\n")
        (sys_dir / f"bus/pci/devices/{bus_id}").symlink_to(f"../../../devices/pci0000:00/{bus_id}")
    outside = tmp_path / "elsewhere/0000:99:00.0"
    outside.mkdir(parents=True)
    (outside / "class").write_text("0x030000\n")
    (sys_dir / "bus/pci/devices/0000:99:00.0").symlink_to(outside)
    loaded = load_host(sys_dir, tmp_path / "proc")
    assert {(d.id, d.resource, d.numa) for d in loaded.topology.devices} == {
        ("0000:3b:00.0", "nvidia.com/gpu", (1,)), ("0000:00:03.0", "hwloc/nic", None)}
    assert [p["bus_id"] for p in loaded.extra["pci_devices"]] == ["0000:00:00.0", "0000:00:03.0", "0000:3b:00.0"]
