"""Importer fixes found on real machines' files, each tested on input written the way the real tool
writes it (see writers.py), and the same machine in several formats giving the same topology."""

import pathlib
import subprocess
import sys

import pytest

from scheduler_core.formats import load, load_topology

from .writers import Machine, hwloc_distances, lscpu, sysfs_tarball, xeon

DATA = pathlib.Path(__file__).parent / "data"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _numa_xml(nodes: int, cpus_per_node: int = 2) -> str:
    """A v2 hwloc XML of `nodes` NUMA nodes with a NUMALatency matrix exported as hwloc does."""
    parts = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
             '<topology version="2.0">', '<object type="Machine" os_index="0">', '<object type="Package" os_index="0">']
    for n in range(nodes):
        first = n * cpus_per_node
        mask = ((1 << cpus_per_node) - 1) << first
        words = range(mask.bit_length() // 32, -1, -1)
        cpuset = ",".join(f"0x{(mask >> (32 * w)) & 0xFFFFFFFF:08x}" for w in words)
        parts.append(f'<object type="Group" cpuset="{cpuset}">')
        parts.append(f'<object type="NUMANode" os_index="{n}" cpuset="{cpuset}" local_memory="1073741824"/>')
        for c in range(first, first + cpus_per_node):
            parts.append(f'<object type="Core" os_index="{c}"><object type="PU" os_index="{c}"/></object>')
        parts.append("</object>")
    parts += ["</object>", "</object>"]
    matrix = {a: {b: 10 if a == b else 20 + abs(a - b) for b in range(nodes)} for a in range(nodes)}
    parts += hwloc_distances(matrix)
    parts.append("</topology>")
    return "\n".join(parts) + "\n"


@pytest.mark.parametrize("nodes", [10, 11, 24, 63])
def test_hwloc_distances_indexes_split_ten_per_element(nodes):
    text = _numa_xml(nodes)
    assert text.count("<indexes") == (nodes + 9) // 10
    t = load_topology(text)
    assert list(t.numa_ids) == list(range(nodes))
    assert t.distance(0, nodes - 1) == 20 + nodes - 1 and t.distance(3, 3) == 10
    assert "distances" not in t.inferred


def _power_with_memory_only_node() -> Machine:
    """POWER9-like: 2 chips, 4 SMT threads per core, physical_package_id -1, NUMA node 8 has memory only."""
    cpus = [(s * 16 + c * 4 + t, -1, c, s) for s in range(2) for c in range(4) for t in range(4)]
    chips = {cpu: "0-15" if cpu < 16 else "16-31" for cpu, *_ in cpus}  # core_siblings_list: the chip
    return Machine(cpus, {0: 64 * 2**20, 1: 64 * 2**20, 8: 32 * 2**20}, None, "POWER9, altivec supported",
                   power=True, package_lists=chips)


def test_lscpu_summary_and_parse_keep_the_memory_only_node():
    m = _power_with_memory_only_node()
    with_parse = load(lscpu(m)).topology
    summary_only = load(lscpu(m, parse=False)).topology
    assert list(with_parse.numa_ids) == list(summary_only.numa_ids) == [0, 1, 8]
    assert not with_parse.numa_cpus[8] and not summary_only.numa_cpus[8]


def test_sysfs_package_id_minus_one_counts_sockets_like_lscpu():
    m = _power_with_memory_only_node()
    sysfs = load(sysfs_tarball(m)).topology
    text = load(lscpu(m)).topology
    assert sysfs.header.num_sockets == text.header.num_sockets == 2
    assert sysfs.header.num_cores == text.header.num_cores == 8
    assert "sockets" not in sysfs.inferred
    for cpu in (0, 15, 16, 31):
        assert sysfs.cpu_info[cpu].socket == text.cpu_info[cpu].socket == cpu // 16
    assert list(sysfs.numa_ids) == list(text.numa_ids) == [0, 1, 8]


def test_sysfs_package_id_minus_one_on_the_s390_dump_agrees_with_its_lscpu():
    sysfs = load_topology(DATA / "lscpu/util-linux/s390-lpar.tar.gz")
    text = load_topology(DATA / "lscpu/util-linux/lscpu-s390-lpar")
    assert sysfs.header.num_sockets == text.header.num_sockets == 7
    assert {c.id: c.socket for c in sysfs.cpus} == {c.id: c.socket for c in text.cpus}


def test_sysfs_machine_line_is_the_model_name():
    m = xeon(1, 2, 2)
    loaded = load(sysfs_tarball(m))
    assert loaded.topology.description == f"sysfs: {m.model}"
    power = _power_with_memory_only_node()
    assert load(sysfs_tarball(power)).topology.description == "sysfs: POWER9, altivec supported"


def test_48_thread_sysfs_tarball_as_hwloc_gather_topology_writes_it():
    """Its import time is in benchmarks/README.md (`python -m benchmarks.import_speed`)."""
    m = xeon(2, 12, 2)
    raw = sysfs_tarball(m)
    t = load(raw).topology
    assert len(t.cpus) == 48 and t.header.num_sockets == 2 and t.header.num_cores == 24
    assert t.cpu_info[24].core == 0 and t.numa_node(1).memory == 96 * 2**30
    assert t.distance(0, 1) == 21


def test_cli_prints_memory_in_human_units_beside_the_exact_value(tmp_path):
    path = tmp_path / "machine.tar.bz2"
    m = xeon(1, 2, 1)
    m.numa_memory_kb = {0: 16428452}
    path.write_bytes(sysfs_tarball(m))
    out = subprocess.run([sys.executable, "-m", "scheduler_core.formats", str(path)], capture_output=True,
                         text=True, cwd=ROOT, timeout=60).stdout
    assert "memory 15.7 GiB (16428452Ki)" in out


# -- the same machine in several formats --------------------------------------------------------------
SAME_MACHINE = [
    ("lscpu/util-linux/lscpu-x86_64-64cpu", "lscpu/util-linux/x86_64-64cpu.tar.gz"),
    ("lscpu/util-linux/lscpu-rv64-milkvpioneer", "lscpu/util-linux/rv64-milkvpioneer.tar.gz"),
    ("lscpu/util-linux/lscpu-s390-lpar", "lscpu/util-linux/s390-lpar.tar.gz"),
    ("lscpu/hwbench/hwbench-cpu_info-cpustorage.txt", "lscpu/hwbench/hwbench-cpu_cores-cpustorage.txt",
     "numactl/hwbench-numa-2domains.txt"),
]


def _partition(t, key) -> set[frozenset[int]]:
    groups: dict = {}
    for c in t.cpus:
        groups.setdefault(key(c), set()).add(c.id)
    return {frozenset(g) for g in groups.values()}


def _stated(t, field: str) -> bool:
    return field not in t.inferred


@pytest.mark.parametrize("files", SAME_MACHINE, ids=[f[0].rsplit("/", 1)[-1] for f in SAME_MACHINE])
def test_same_machine_in_several_formats(files):
    loaded = [load(DATA / f) for f in files]
    first = loaded[0].topology
    for other in loaded[1:]:
        t = other.topology
        where = f"{files[0]} vs {other.format}"
        assert [c.id for c in t.cpus] == [c.id for c in first.cpus], where
        assert t.offline_cpus == first.offline_cpus or not (t.offline_cpus and first.offline_cpus), where
        if _stated(t, "numa_nodes") and _stated(first, "numa_nodes"):
            assert {n: t.numa_cpus[n] for n in t.numa_ids if t.numa_cpus[n]} == \
                   {n: first.numa_cpus[n] for n in first.numa_ids if first.numa_cpus[n]}, where
        if _stated(t, "cores") and _stated(first, "cores"):
            assert _partition(t, lambda c: c.core) == _partition(first, lambda c: c.core), where
        if _stated(t, "sockets") and _stated(first, "sockets"):
            assert _partition(t, lambda c: c.socket) == _partition(first, lambda c: c.socket), where
        if t.distances is not None and first.distances is not None:
            assert t.distances == first.distances, where
        for nid in set(t.numa_ids) & set(first.numa_ids):
            a, b = t.numa_node(nid).memory, first.numa_node(nid).memory
            if a and b:
                assert a == b, f"{where}: NUMA {nid} memory"


def test_sysfs_tar_reader_refuses_bombs_and_damage(monkeypatch):
    import bz2
    import gzip

    from scheduler_core.errors import FormatError
    from scheduler_core.formats import sysfs

    raw = sysfs_tarball(xeon(1, 2, 1))
    tar = bz2.decompress(raw)
    monkeypatch.setattr(sysfs, "MAX_TAR_BYTES", len(tar) - 1)
    with pytest.raises(FormatError, match="decompresses to more than"):
        load(raw)
    monkeypatch.undo()
    with pytest.raises(FormatError, match="truncated"):
        load(raw[: len(raw) // 2])
    damaged = bytearray(tar)
    damaged[1024 + 124:1024 + 136] = b"77777777777\x00"  # the second member claims 8 GiB of data
    with pytest.raises(FormatError, match="runs past the end"):
        load(gzip.compress(bytes(damaged)))
