"""Node allocation state: allocate, release, no double booking, JSON round trip."""

import subprocess
import sys

import pytest

from scheduler_core import Allocation, CPUSet, InsufficientResourcesError, KubeletConfig, Node
from scheduler_core.kubelet.cpumanager.cpu_manager import reserved_cpu_set
from scheduler_core.model.topology import synthetic

GiB = 1 << 30


def _node(**kubelet):
    t = synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB, devices_per_numa={"nvidia.com/gpu": 1})
    return Node("n1", t, KubeletConfig(cpu_manager_policy="static", **kubelet))


def test_allocate_and_release_restore_state():
    node = _node(reserved_cpus=CPUSet([0]))
    before = node.state_key()
    node.allocate(Allocation("p1", "c", CPUSet.parse("1,5"), {0: {"memory": GiB}}, {"nvidia.com/gpu": ("gpu0",)}))
    assert str(CPUSet(node.free_cpus)) == "2-4,6-7"
    assert node.free_cpus_per_numa() == {0: 1, 1: 4}
    assert node.memory_free(0) == 7 * GiB
    assert node.free_devices("nvidia.com/gpu") == ["gpu1"]
    assert node.state_key() != before
    released = node.release("p1")
    assert len(released) == 1 and node.state_key() == before


@pytest.mark.parametrize(("alloc", "needle"), [
    (Allocation("p2", "c", CPUSet([0])), "reserved or already allocated"),
    (Allocation("p2", "c", CPUSet([1])), "reserved or already allocated"),
    (Allocation("p2", "c", CPUSet([99])), "not on the machine"),
    (Allocation("p2", "c", devices={"nvidia.com/gpu": ("gpu0",)}), "already allocated"),
    (Allocation("p2", "c", devices={"nvidia.com/gpu": ("gpu9",)}), "not on the node"),
])
def test_no_double_booking(alloc, needle):
    node = _node(reserved_cpus=CPUSet([0]))
    node.allocate(Allocation("p1", "c", CPUSet([1]), devices={"nvidia.com/gpu": ("gpu0",)}))
    key = node.state_key()
    with pytest.raises(InsufficientResourcesError, match=needle):
        node.allocate(alloc)
    assert node.state_key() == key


def test_copy_is_independent():
    node = _node()
    other = node.copy()
    other.allocate(Allocation("p1", "c", CPUSet([2])))
    assert node.free_cpus != other.free_cpus and not node.allocations


def test_json_round_trip():
    node = _node(reserved_cpus=CPUSet([0]))
    node.allocate(Allocation("p1", "c", CPUSet([1]), {1: {"memory": GiB}}, origin="imported"))
    again = Node.from_dict(node.to_dict())
    assert again.to_dict() == node.to_dict()
    assert again.state_key() == node.state_key()


def test_state_key_is_hashable_with_reserved_memory():
    t = synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB)
    a = Node("a", t, KubeletConfig(reserved_memory={0: {"memory": GiB}}))
    b = Node("b", synthetic(1, 2, 2, 2, memory_per_numa=8 * GiB), KubeletConfig(reserved_memory={0: {"memory": GiB}}))
    assert {a.state_key(): "class"}[b.state_key()] == "class"


def test_reserved_cpus_by_millicores_are_the_cpu_managers_choice_without_importing_it_first():
    """The model imports no manager: the package plugs the CPU Manager's reserved-CPU rule in, so a node
    built from `scheduler_core.model.node` alone (a fresh interpreter) still gets the kubelet's choice."""
    code = ("from scheduler_core.model.node import Node; from scheduler_core.model.kubelet_config import KubeletConfig;"
            "from scheduler_core.model.topology import synthetic;"
            "import sys; assert 'scheduler_core.kubelet.cpumanager.cpu_manager' not in sys.modules;"
            "k = KubeletConfig(cpu_manager_policy='static', reserved_cpu_milli=1500);"
            "print(Node('n', synthetic(1, 2, 2, 2), k).reserved_cpus)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    topology = synthetic(1, 2, 2, 2)
    assert out.strip() == str(reserved_cpu_set(topology, None, 1500)) == "0,4"
