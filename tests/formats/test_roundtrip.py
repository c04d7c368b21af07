"""Exporters: engine JSON is an identity, synthetic strings round-trip, NRT/Numatopology re-import."""

import json
import pathlib

import pytest

from scheduler_core.errors import FormatError
from scheduler_core.formats import dump_topology, load, load_topology
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Allocation, Node
from scheduler_core.model.topology import synthetic

DATA = pathlib.Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["hwloc-xml/v2/24em64t-2n6c2t-pci.xml", "hwloc-xml/v2/16amd64-8n2c-cpusets.xml",
                                  "lscpu/util-linux/lscpu-x86_64-64cpu", "numactl/hwbench-numa-8domainsllc.txt",
                                  "k8s/nrt/nrt-api-crd-instance-example.yaml"])
def test_engine_json_round_trip_is_identity(name):
    t = load_topology(DATA / name)
    text = dump_topology(t, "engine-json")
    again = load_topology(text)
    assert again == t
    assert dump_topology(again, "engine-json") == text
    assert json.loads(text)["kind"] == "numaweb.topology"


def test_engine_json_node_round_trip():
    node = Node("n1", synthetic(2, 1, 4, 2, memory_per_numa=2**30),
                KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted"),
                [Allocation("p", "c", CPUSet.parse("1-2"))])
    loaded = load(dump_topology(node, "engine-json"))
    assert loaded.topology == node.topology and loaded.kubelet == node.kubelet
    assert [a.to_dict() for a in loaded.allocations] == [a.to_dict() for a in node.allocations]


@pytest.mark.parametrize("text", ["pack:2 numa:2 core:8 pu:2", "pack:2 numa:2 l3:2 core:4 pu:2",
                                  "pack:1 [numa] core:4 pu:1", "pack:4 core:2 pu:1",
                                  "pack:2 numa:3(memory=17179869184) core:4 pu:2"])
def test_synthetic_round_trip(text):
    t = load_topology(text)
    assert dump_topology(t, "synthetic") == text


def test_synthetic_bare_arities_and_numbering():
    t = load_topology("2 4 2", format="synthetic")
    assert t.header.num_sockets == 2 and t.header.num_cores == 8 and t.header.num_cpus == 16
    assert t.core_cpus[0] == 0b11  # hwloc numbers PUs in tree order
    assert "numa_nodes" in t.inferred


def test_synthetic_export_refuses_asymmetric_machines():
    with pytest.raises(FormatError, match="not symmetric"):
        dump_topology(load_topology(DATA / "hwloc-xml/v3/Intel-RaptorLake-Corei7-1370P.xml"), "synthetic")
    with pytest.raises(FormatError, match="not symmetric"):
        dump_topology(load_topology(DATA / "hwloc-xml/v2/8ia64-2n2s2c+1n.v1tov2.xml"), "synthetic")


def test_synthetic_export_of_a_real_symmetric_machine():
    t = load_topology(DATA / "hwloc-xml/v2/32em64t-2n8c2t-pci-normalio.xml")
    assert dump_topology(t, "synthetic").startswith("pack:2 [numa")
    shape = load_topology(dump_topology(t, "synthetic"))
    assert shape.header == t.header


def _node():
    t = synthetic(2, 2, 4, 2, memory_per_numa=8 * 2**30, devices_per_numa={"nvidia.com/gpu": 1})
    kubelet = KubeletConfig(cpu_manager_policy="static", reserved_cpus=CPUSet.parse("0,16"),
                            topology_manager_policy="single-numa-node", topology_manager_scope="pod")
    alloc = Allocation("p1", "c", CPUSet.parse("1-2,17-18"), memory={0: {"memory": 2**30}},
                       devices={"nvidia.com/gpu": ("gpu0",)})
    return Node("worker-1", t, kubelet, [alloc])


def test_nrt_export_then_import():
    node = _node()
    text = dump_topology(node, "nrt")
    loaded = load(text)
    assert loaded.format == "nrt"
    zone0 = loaded.extra["zones"]["node-0"]
    assert zone0["cpu"] == {"capacity": 8, "allocatable": 6, "available": 2}
    assert zone0["memory"]["available"] == 7 * 2**30
    assert zone0["nvidia.com/gpu"]["available"] == 0
    assert loaded.kubelet.topology_manager_policy == "single-numa-node"
    assert loaded.kubelet.topology_manager_scope == "pod"
    t = loaded.topology
    assert [len(CPUSet(m)) for m in t.numa_cpus.values()] == [8, 8, 8, 8]
    assert t.distance(0, 1) == 12 and t.distance(0, 2) == 21


def test_numatopology_export_then_import():
    node = _node()
    loaded = load(dump_topology(node, "numatopo"))
    assert loaded.format == "numatopo"
    t = loaded.topology
    # CPU ids, sockets, NUMA nodes and core grouping survive; zeros were omitted in cpuDetail
    assert {c.id: (c.socket, c.numa) for c in t.cpus} == {c.id: (c.socket, c.numa) for c in node.topology.cpus}
    assert t.core_cpus == node.topology.core_cpus
    assert loaded.kubelet.reserved_cpus == CPUSet.parse("0,16")
    assert loaded.kubelet.topology_manager_policy == "single-numa-node"
