"""Volcano's NUMA-aware user guide: its lscpu excerpt and cpu_manager_state JSON import."""

import pathlib

from scheduler_core.formats import detect_format, load, load_allocations
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.node import Node

SEEDS = pathlib.Path(__file__).parent / "data" / "seeds"


def test_seed001_lscpu_excerpt():
    path = SEEDS / "seed001-lscpu.txt"
    assert detect_format(path) == "lscpu-text"
    loaded = load(path)
    t = loaded.topology
    assert t.header.num_cpus == 32
    assert t.numa_ids == (0, 1)
    assert CPUSet(t.numa_cpus[0]) == CPUSet.parse("0-15")
    assert CPUSet(t.numa_cpus[1]) == CPUSet.parse("16-31")
    # no thread/socket lines in the excerpt: one thread per core, one socket per NUMA node, flagged
    assert t.header.num_cores == 32 and t.header.num_sockets == 2
    assert {"cores", "sockets"} <= set(loaded.inferred)


def test_seed001_cpu_manager_state():
    path = SEEDS / "seed001-cpu_manager_state.json"
    assert detect_format(path) == "cpu-manager-state"
    allocs = load_allocations(path)
    by_pod = {a.pod: a for a in allocs}
    assert str(by_pod["777870b5-c64f-42f5-9296-688b9dc212ba"].cpus) == "16-24"
    assert str(by_pod["fb15e10a-b6a5-4aaa-8fcd-76c1aa64e6fd"].cpus) == "1-9"
    assert all(a.container == "container-1" and a.origin == "imported" for a in allocs)
    loaded = load(path)
    assert loaded.extra["policy"] == "static" and loaded.extra["checksum"] == 318470969
    assert loaded.extra["default_cpuset"] == "0,10-15,25-31"
    # the imported pinning sits on the seed's machine: one container per NUMA node
    node = Node("seed-node", load(SEEDS / "seed001-lscpu.txt").topology, allocations=allocs)
    assert node.free_cpus_per_numa() == {0: 7, 1: 7}
