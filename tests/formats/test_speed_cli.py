"""The big machines import whole, and the command-line entry. Import times are printed (pytest -s);
their targets live in benchmarks/import_speed.py, since wall-clock asserts are flaky on a shared machine."""

import json
import pathlib
import subprocess
import sys
import time

from scheduler_core.formats import load_topology

from .writers import hwloc_array

DATA = pathlib.Path(__file__).parent / "data"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _best_of(n, fn):
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _zen4_like_xml() -> str:
    """A v2 hwloc XML of 2 packages × 12 NUMA nodes (one L3 each) × 8 cores × 2 PUs = 384 threads,
    SMT siblings N and N+192, with a 24×24 NUMALatency matrix."""
    parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
             '<topology version="2.0">\n<object type="Machine" os_index="0">']
    for pkg in range(2):
        parts.append(f'<object type="Package" os_index="{pkg}">')
        for local in range(12):
            numa = pkg * 12 + local
            parts.append(f'<object type="L3Cache" cache_size="33554432" depth="3">'
                         f'<object type="NUMANode" os_index="{numa}" cpuset="0x0" local_memory="68719476736">'
                         f'<page_type size="4096" count="0"/><page_type size="2097152" count="512"/></object>')
            for core in range(8):
                c = numa * 8 + core
                parts.append(f'<object type="Core" os_index="{c}"><object type="PU" os_index="{c}"/>'
                             f'<object type="PU" os_index="{c + 192}"/></object>')
            parts.append("</object>")
        parts.append("</object>")
    parts.append("</object>")
    values = [10 if a == b else (12 if a // 12 == b // 12 else 32) for a in range(24) for b in range(24)]
    parts.append('<distances2 type="NUMANode" nbobjs="24" kind="5" name="NUMALatency" indexing="os">')
    parts += hwloc_array("indexes", range(24))
    parts += hwloc_array("u64values", values)
    parts.append("</distances2></topology>\n")
    text = "\n".join(parts)
    # NUMANode cpusets, as hwloc writes them: the node's 16 PUs
    for numa in range(24):
        mask = 0
        for core in range(numa * 8, numa * 8 + 8):
            mask |= 1 << core | 1 << (core + 192)
        words = []
        while mask:
            words.append(f"0x{mask & 0xFFFFFFFF:08x}")
            mask >>= 32
        cpuset = ",".join(reversed(words))
        text = text.replace(f'os_index="{numa}" cpuset="0x0"', f'os_index="{numa}" cpuset="{cpuset}"')
    return text


def test_zen4_384_threads_imports():
    path = DATA / "hwloc-xml/v3/AMD-19h-Zen4-2xEpyc-9654.xml"
    t = load_topology(path)
    assert t.header.num_cpus == 384
    best = _best_of(3, lambda: load_topology(path))
    print(f"AMD-19h-Zen4-2xEpyc-9654.xml: {best * 1000:.1f} ms")


def test_24_numa_384_thread_machine_imports():
    text = _zen4_like_xml()
    t = load_topology(text)
    assert t.header.num_cpus == 384 and len(t.numa_ids) == 24 and t.header.num_cores == 192
    assert t.distance(0, 13) == 32 and t.distance(0, 11) == 12
    assert t.numa_node(5).hugepages == {"hugepages-2Mi": 512 * 2**21}
    assert t.cpu_info[192].core == 0 and len(t.uncore_cpus) == 24
    best = _best_of(3, lambda: load_topology(text))
    print(f"24-NUMA 384-thread hwloc XML: {best * 1000:.1f} ms")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "scheduler_core.formats", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_cli_summary():
    out = _cli(str(DATA / "hwloc-xml/v2/28intel64-2p2g7c-CoDgroups.v1tov2.xml"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("format: hwloc-xml")
    assert "sockets: 2  NUMA nodes: 4  cores: 28  threads: 28" in out.stdout
    assert "NUMA 2: sockets [1] CPUs 14-20" in out.stdout
    assert "distances:" in out.stdout and len(out.stdout.splitlines()) < 25


def test_cli_summary_counts_physical_devices_under_plugin_names():
    out = _cli(str(DATA / "hwloc-xml/v2/power8gpudistances.xml"))
    assert out.returncode == 0, out.stderr
    assert "NUMA 0: sockets [0] CPUs 0-1,8-9,16-17,24-25" in out.stdout
    assert out.stdout.count("devices: nvidia.com/gpu×2") == 2 and "coproc" not in out.stdout
    assert "inferred (not in the file): device_resources" in out.stdout


def test_cli_json():
    out = _cli(str(DATA / "numactl/hwbench-numa-2domains.txt"), "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert data["kind"] == "numaweb.topology" and len(data["cpus"]) == 72


def test_cli_bad_input_exit_2(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object type='Machine'>")
    out = _cli(str(bad))
    assert out.returncode == 2
    assert out.stderr.startswith("error: hwloc XML is not well-formed") and len(out.stderr.splitlines()) == 1
    out = _cli(str(DATA / "hwloc-xml/v2/16em64t-4s2c2t.xml"), "--format", "nope")
    assert out.returncode == 2 and "supported formats" in out.stderr
