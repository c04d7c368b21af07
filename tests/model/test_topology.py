"""Topology: validation with clear errors, derived indexes, JSON round trip."""

import pytest

from scheduler_core import CPU, CPUSet, Device, Header, NUMANode, Topology, TopologyError
from scheduler_core.model.topology import synthetic


def test_synthetic_shape_and_indexes():
    t = synthetic(2, 2, 16, 2, memory_per_numa=64 << 30, devices_per_numa={"nvidia.com/gpu": 2})
    assert t.header == Header(128, 2, 64, 4, 2)
    assert t.cpus_per_core == 2 and t.cpus_per_socket == 64
    assert not t.numa_first  # several NUMA nodes per socket: sockets first
    assert str(t.cpus_in_numa([0])) == "0-15,64-79"
    assert t.socket_numas == {0: (0, 1), 1: (2, 3)}
    assert t.numa_mask_of_cpus(CPUSet([0, 127])) == 0b1001
    assert t.distance(0, 1) == 12 and t.distance(0, 2) == 21
    assert [d.id for d in t.devices_of("nvidia.com/gpu")] == [f"gpu{i}" for i in range(8)]
    assert t.threads_per_core == 2


def test_json_round_trip_is_identity():
    t = synthetic(1, 2, 4, 2, memory_per_numa=8 << 30, devices_per_numa={"example.com/nic": 1})
    data = t.to_dict()
    again = Topology.from_dict(data)
    assert again == t
    assert again.to_dict() == data


def test_declared_header_survives_round_trip():
    cpus = [CPU(i, i, 0, 0) for i in range(4)]
    t = Topology(cpus, header=Header(4, 1, 4, 0, 0))
    assert t.numa_first and t.cpus_per_uncore == 0
    assert Topology.from_dict(t.to_dict()).header == Header(4, 1, 4, 0, 0)


def test_cpu_listed_twice():
    with pytest.raises(TopologyError, match="CPU 1 is listed twice"):
        Topology([CPU(0, 0, 0, 0), CPU(1, 1, 0, 0), CPU(1, 1, 0, 0)])


def test_cpu_without_numa_node():
    with pytest.raises(TopologyError, match="CPU 3 has no NUMA node"):
        Topology.from_dict({"cpus": [{"cpu": 3, "core": 3, "socket": 0}]})
    with pytest.raises(TopologyError, match="CPU 2 has no NUMA node"):
        Topology([CPU(2, 2, 0, None)])


def test_cpu_on_unknown_numa_node():
    with pytest.raises(TopologyError, match="CPU 1 is on NUMA node 1"):
        Topology([CPU(0, 0, 0, 0), CPU(1, 1, 0, 1)], numa_nodes=[NUMANode(0)])


@pytest.mark.parametrize(("cpu", "needle"), [
    (CPU(-1, 0, 0, 0), "CPU id cannot be negative: -1"),
    (CPU(0, 0, 1.5, 0), "socket of CPU 0 must be an integer, not 1.5"),
    (CPU(0, True, 0, 0), "core of CPU 0 must be an integer, not True"),
])
def test_bad_ids(cpu, needle):
    with pytest.raises(TopologyError, match=needle):
        Topology([cpu])


def test_negative_memory():
    with pytest.raises(TopologyError, match="memory of NUMA node 0 cannot be negative: -5"):
        Topology([CPU(0, 0, 0, 0)], numa_nodes=[NUMANode(0, -5)])


def test_bad_distances():
    with pytest.raises(TopologyError, match="has 1 values; expected 2"):
        Topology([CPU(0, 0, 0, 0), CPU(1, 1, 0, 1)], distances={0: [10], 1: [10, 20]})
    with pytest.raises(TopologyError, match="missing for NUMA nodes"):
        Topology([CPU(0, 0, 0, 0), CPU(1, 1, 0, 1)], distances={0: [10, 20]})


def test_device_on_unknown_numa():
    with pytest.raises(TopologyError, match="device 'gpu0' is on NUMA node 7"):
        Topology([CPU(0, 0, 0, 0)], devices=[Device("gpu0", "nvidia.com/gpu", (7,))])


def test_empty_topology():
    with pytest.raises(TopologyError, match="at least one CPU"):
        Topology([])


def test_cpu_less_numa_node_is_kept():
    t = Topology([CPU(0, 0, 0, 0)], numa_nodes=[NUMANode(0, 1 << 30), NUMANode(1, 2 << 30)])
    assert t.numa_ids == (0, 1) and t.cpu_numa_ids == (0,)
    assert t.numa_cpus[1] == 0


def test_synthetic_rejects_nonsense():
    with pytest.raises(TopologyError, match="threads must be at least 1, not 0"):
        synthetic(1, 1, 1, 0)


def test_fingerprint_is_content_based():
    assert synthetic(1, 2, 2, 2).fingerprint == synthetic(1, 2, 2, 2).fingerprint
    assert synthetic(1, 2, 2, 2).fingerprint != synthetic(1, 2, 2, 1).fingerprint
