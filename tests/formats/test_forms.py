"""Forms of the text formats that the corpus does not hold: lscpu -e, numactl --cpu-compress."""

from scheduler_core import load_topology
from scheduler_core.formats import detect_format
from scheduler_core.model.cpuset import CPUSet

LSCPU_E = """CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE    MAXMHZ   MINMHZ
  0    0      0    0 0:0:0:0          yes 3400.0000 800.0000
  1    0      0    1 1:1:1:0          yes 3400.0000 800.0000
  2    1      1    2 2:2:2:1          yes 3400.0000 800.0000
  3    -      -    - -                 no         -        -
  4    0      0    0 0:0:0:0          yes 3400.0000 800.0000
"""
NUMACTL_COMPRESSED = """available: 2 nodes (0-1)
node 0 cpus: 0-3,8-11 (8)
node 0 size: <not available>
node 1 cpus: 4-7,12-15 (8)
node 1 size: 1024 MB
No distance information available.
"""


def test_lscpu_extended_table():
    assert detect_format(LSCPU_E) == "lscpu-parse"
    t = load_topology(LSCPU_E)
    assert t.offline_cpus == CPUSet.parse("3")
    assert t.core_cpus[0] == 0b10001  # CPUs 0 and 4 share core 0
    assert t.cpu_info[2].uncore == 1 and t.cpu_info[2].numa == 1


def test_numactl_cpu_compress_and_unknown_size():
    assert detect_format(NUMACTL_COMPRESSED) == "numactl-hardware"
    t = load_topology(NUMACTL_COMPRESSED)
    assert CPUSet(t.numa_cpus[1]) == CPUSet.parse("4-7,12-15")
    assert [n.memory for n in t.numa_nodes] == [0, 2**30]
    assert t.distances is None and t.header.num_cores == 8  # siblings c and c+8 share a core
