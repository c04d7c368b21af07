"""Bad and hostile input: one clear FormatError (or EngineError subclass) naming the problem, fast,
with bounded memory."""

import pathlib
import random
import time
import tracemalloc

import pytest

from scheduler_core.errors import CPUSetError, EngineError, FormatError
from scheduler_core.formats import detect_format, load_allocations, load_jobs, load_topology

DATA = pathlib.Path(__file__).parent / "data"
HWLOC = (DATA / "hwloc-xml/v2/24em64t-2n6c2t-pci.xml").read_text()

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE topology [
 <!ENTITY a "aaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
 <!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
 <!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">
]>
<topology version="2.0"><object type="Machine" os_index="0"><info name="x" value="&h;"/></object></topology>
"""
EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE topology [<!ENTITY leak SYSTEM "file:///etc/passwd">]>
<topology version="2.0"><object type="Machine" os_index="0"><info name="x" value="&leak;"/></object></topology>
"""
YAML_BOMB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
NRT_BOMB = YAML_BOMB.replace("batch.volcano.sh/v1alpha1", "topology.node.k8s.io/v1alpha2").replace(
    "kind: Job", "kind: NodeResourceTopology")


def _bounded(fn, *args, **kwargs):
    """Run fn expecting an EngineError, timed (under a second of this thread's CPU time, which a loaded
    machine does not inflate as it does wall time), then again traced (bounded memory)."""
    start = time.thread_time()
    with pytest.raises(EngineError):
        fn(*args, **kwargs)
    elapsed = time.thread_time() - start
    assert elapsed < 1.0, f"took {elapsed:.2f} s of CPU"
    tracemalloc.start()
    try:
        with pytest.raises(EngineError) as info:
            fn(*args, **kwargs)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"peak memory {peak} bytes"
    message = str(info.value)
    assert message and "\n" not in message
    return info.value


def test_truncated_xml_names_line():
    err = _bounded(load_topology, HWLOC[: len(HWLOC) // 2])
    assert isinstance(err, FormatError) and "not well-formed at line" in str(err)


def test_xml_entity_bomb():
    err = _bounded(load_topology, BILLION_LAUGHS)
    assert isinstance(err, FormatError) and "entit" in str(err).lower()


def test_xml_external_entity():
    err = _bounded(load_topology, EXTERNAL)
    assert isinstance(err, FormatError) and "entit" in str(err).lower()
    assert "root:" not in str(err)


def test_xml_deep_nesting():
    text = '<topology version="2.0">' + '<object type="Group">' * 3000 + "</object>" * 3000 + "</topology>"
    err = _bounded(load_topology, text)
    assert "no PU objects" in str(err)


def test_xml_duplicate_pu():
    text = HWLOC.replace('type="PU" os_index="2"', 'type="PU" os_index="0"', 1)
    assert text != HWLOC
    err = _bounded(load_topology, text)
    assert "CPU 0 is listed twice" in str(err)


def test_xml_pu_without_os_index_names_element():
    text = HWLOC.replace('type="PU" os_index="2"', 'type="PU"', 1)
    err = _bounded(load_topology, text)
    assert '<object type="PU">' in str(err)


def test_yaml_bomb_job():
    err = _bounded(load_jobs, YAML_BOMB)
    assert isinstance(err, FormatError) and "YAML bomb" in str(err)


def test_yaml_bomb_topology():
    err = _bounded(load_topology, NRT_BOMB)
    assert "YAML bomb" in str(err)


def test_fifty_megabyte_file(tmp_path):
    big = tmp_path / "big.xml"
    with big.open("wb") as fh:
        fh.write(b"<topology>")
        fh.seek(50 * 2**20)
        fh.write(b"</topology>")
    err = _bounded(load_topology, big)
    assert "larger than the 16 MiB limit" in str(err)


def test_fifty_megabyte_text():
    text = "CPU(s): 4\n" + "x" * (50 * 2**20)
    start = time.perf_counter()
    with pytest.raises(FormatError, match="larger than the 16 MiB limit"):
        load_topology(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_binary_garbage(seed):
    data = random.Random(seed).randbytes(8192)
    err = _bounded(load_topology, data)
    assert isinstance(err, FormatError)


def test_binary_garbage_disguised_as_archive():
    err = _bounded(load_topology, b"\x1f\x8b" + random.Random(4).randbytes(4096))
    assert "not a readable tar archive" in str(err)


@pytest.mark.parametrize("cpus", ["3-1", "0-99999999"])
def test_bad_cpusets_in_lscpu_name_line(cpus):
    text = f"CPU(s): 4\nOn-line CPU(s) list: 0-3\nNUMA node(s): 1\nNUMA node0 CPU(s): {cpus}\n"
    err = _bounded(load_topology, text)
    assert "lscpu line 4" in str(err) and cpus.split("-")[1] in str(err)


@pytest.mark.parametrize("cpus", ["3-1", "0-99999999"])
def test_bad_cpusets_in_cpu_manager_state(cpus):
    text = '{"policyName":"static","defaultCpuSet":"' + cpus + '","checksum":1}'
    err = _bounded(load_allocations, text)
    assert "defaultCpuSet" in str(err)


def test_bad_cpuset_direct():
    from scheduler_core.cpuset import CPUSet

    with pytest.raises(CPUSetError, match="reversed"):
        CPUSet.parse("3-1")


def test_duplicate_cpu_in_lscpu_parse():
    text = "# CPU,Core,Socket,Node\n0,0,0,0\n1,1,0,0\n1,1,0,0\n"
    err = _bounded(load_topology, text)
    assert "lscpu line 4: CPU 1 is listed twice" in str(err)


def test_duplicate_cpu_in_numactl():
    text = ("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 100 MB\nnode 1 cpus: 1 2\n"
            "node 1 size: 100 MB\n")
    err = _bounded(load_topology, text)
    assert "CPU 1 is listed by nodes 0 and 1" in str(err)


def test_lscpu_without_cpu_lines():
    err = _bounded(load_topology, "Socket(s): 1\nNUMA node(s): 1\nModel name: x\n")
    assert "no CPU lines" in str(err)
    err = _bounded(load_topology, "# CPU,Core,Socket,Node\n")
    assert "no CPU rows" in str(err)


def test_unknown_format_lists_supported_formats():
    err = _bounded(load_topology, "hello world, this is not a topology\nat all\n")
    assert "format not recognised (tried: hwloc-xml, " in str(err) and "synthetic" in str(err)
    # one line of words is not taken for an hwloc synthetic string (that needs counts, `pack:2 core:4`)
    err = _bounded(load_topology, "this is not a topology\n")
    assert "format not recognised" in str(err) and "unknown level type" not in str(err)
    with pytest.raises(FormatError, match="supported formats"):
        load_topology("pack:2 core:2 pu:1", format="word")


def test_detect_format_on_garbage():
    with pytest.raises(FormatError):
        detect_format("")


def test_numactl_mismatched_distance_row():
    text = ("available: 2 nodes (0-1)\nnode 0 cpus: 0\nnode 0 size: 1 MB\nnode 1 cpus: 1\nnode 1 size: 1 MB\n"
            "node distances:\nnode   0   1 \n  0:  10  20 \n  1:  20 \n")
    err = _bounded(load_topology, text)
    assert "numactl line 9" in str(err)


def test_synthetic_too_large():
    err = _bounded(load_topology, "pack:1000 core:1000 pu:1000", format="synthetic")
    assert "more than 65536 PUs" in str(err)


def test_load_text_instead_of_numa_ids_above_63_with_cpus():
    text = "available: 1 nodes (70)\nnode 70 cpus: 0 1\nnode 70 size: 1 MB\n"
    err = _bounded(load_topology, text)
    assert "above 63" in str(err)
