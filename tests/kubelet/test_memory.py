"""Memory Manager static policy: machine state, hints, allocation, release and reuse (ENGINE.md §2.8)."""

import pytest

from scheduler_core.errors import InsufficientResourcesError, RequestError, TopologyError
from scheduler_core.kubelet.memorymanager.policy_static import (
    MemoryAllocationError,
    MemoryManager,
    allocate_memory,
    best_hint,
    calculate_hints,
    memory_topology_hints,
    release_memory,
)
from scheduler_core.kubelet.memorymanager.state import Block, MachineState
from scheduler_core.kubelet.topologymanager.hint import TopologyHint
from scheduler_core.model.bitmask import mask_of
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import CPU, NUMANode, Topology

Gi, Mi = 2**30, 2**20


def machine(memory=(4 * Gi, 4 * Gi), hugepages=None):
    n = len(memory)
    cpus = [CPU(i, i, 0, i) for i in range(n)]
    nodes = [NUMANode(i, memory[i], (hugepages or {}).get(i, {})) for i in range(n)]
    return Topology(cpus, nodes)


def H(nodes, preferred):
    return TopologyHint(mask_of(nodes), preferred)


def state_of(memory=(4 * Gi, 4 * Gi), reserved=None, hugepages=None):
    return MachineState.from_topology(machine(memory, hugepages), reserved)


# -- machine state ------------------------------------------------------------------------------------

def test_machine_state_from_topology_subtracts_reserved_and_hugepages():
    st = state_of(hugepages={0: {"hugepages-1Gi": 2 * Gi}}, reserved={0: {"memory": 512 * Mi}})
    n0, n1 = st.nodes[0], st.nodes[1]
    assert n0.cells == [0] and n0.assignments == 0
    assert n0.memory["memory"].to_dict() == {"total": 4 * Gi, "system_reserved": 512 * Mi,
                                             "allocatable": 4 * Gi - 512 * Mi - 2 * Gi, "reserved": 0,
                                             "free": 4 * Gi - 512 * Mi - 2 * Gi}
    assert n0.memory["hugepages-1Gi"].allocatable == 2 * Gi
    # a hugepage size of another node exists (empty) on every node
    assert n1.memory["hugepages-1Gi"].to_dict() == {"total": 0, "system_reserved": 0, "allocatable": 0,
                                                    "reserved": 0, "free": 0}
    assert n1.memory["memory"].allocatable == 4 * Gi


def test_machine_state_rejects_impossible_reservations():
    with pytest.raises(TopologyError, match="5368709120"):
        state_of(reserved={0: {"memory": 5 * Gi}})
    with pytest.raises(TopologyError, match="NUMA node 7"):
        state_of(reserved={7: {"memory": Gi}})
    with pytest.raises(RequestError, match="-1"):
        state_of(reserved={0: {"memory": -1}})


# -- hints ----------------------------------------------------------------------------------------------

def test_hints_single_and_cross_numa_preferred_from_allocatable():
    st = state_of((2 * Gi, 2 * Gi))
    assert calculate_hints(st, {"memory": Gi}) == {"memory": [H([0], True), H([1], True), H([0, 1], False)]}
    assert calculate_hints(st, {"memory": 3 * Gi}) == {"memory": [H([0, 1], True)]}
    # nothing fits: no entry at all (the Topology Manager reads {} as "no preference")
    assert calculate_hints(st, {"memory": 5 * Gi}) == {}


def test_hints_after_cross_numa_allocation_keep_the_group():
    st = state_of((2 * Gi, 2 * Gi, 2 * Gi))
    allocate_memory(st, {"memory": 3 * Gi}, H([0, 1], True))
    assert st.nodes[0].cells == [0, 1] and st.nodes[1].cells == [0, 1]
    hints = calculate_hints(st, {"memory": 512 * Mi})["memory"]
    # nodes 0 and 1 are bound together: neither alone nor with node 2; node 2 alone is fine
    assert hints == [H([2], True), H([0, 1], False)]


def test_memory_topology_hints_entry_points():
    st = state_of()
    assert memory_topology_hints(st, {"memory": Gi}, qos="Burstable") is None
    c = Container.guaranteed("c", 1000, Gi)
    pod = Pod("p", [c])
    assert memory_topology_hints(st, pod=pod, container=c) == {"memory": [H([0], True), H([1], True),
                                                                          H([0, 1], False)]}
    blocks = [Block((1,), "memory", Gi)]
    assert memory_topology_hints(st, pod=pod, container=c, existing_blocks=blocks) == {"memory": [H([1], True)]}
    assert memory_topology_hints(st, pod=pod, container=c, existing_blocks=[Block((1,), "memory", 2 * Gi)]) is None
    burstable = Pod("b", [Container("c", {"memory": Gi}, {"memory": 2 * Gi})])
    assert memory_topology_hints(st, pod=burstable, container=burstable.containers[0]) is None


def test_bad_memory_requests():
    st = state_of()
    with pytest.raises(RequestError, match="-5"):
        calculate_hints(st, {"memory": -5})
    with pytest.raises(RequestError, match="'cpu'"):
        calculate_hints(st, {"cpu": 1})
    with pytest.raises(InsufficientResourcesError, match=r"^\[memorymanager\] failed to get the default NUMA affinity, "
                                                         "no NUMA nodes with enough memory is available$"):
        allocate_memory(st, {"memory": 10 * Gi}, None)  # more than the machine: the kubelet's own text
    with pytest.raises(InsufficientResourcesError, match=r"^\[memorymanager\] failed to find NUMA nodes to extend"):
        allocate_memory(st, {"memory": 10 * Gi}, H([0], True))
    with pytest.raises(TopologyError, match="NUMA node 5"):
        allocate_memory(st, {"memory": Gi}, H([5], True))


# -- allocation -----------------------------------------------------------------------------------------

def test_allocate_single_numa_and_release_restores_the_state():
    st = state_of(hugepages={0: {"hugepages-1Gi": 2 * Gi}, 1: {"hugepages-1Gi": 2 * Gi}})
    initial = st.copy()
    blocks = allocate_memory(st, {"memory": Gi, "hugepages-1Gi": Gi}, H([1], True))
    assert blocks == [Block((1,), "memory", Gi), Block((1,), "hugepages-1Gi", Gi)]
    n1 = st.nodes[1]
    assert n1.assignments == 2 and n1.cells == [1]
    assert n1.memory["memory"].free == 2 * Gi - Gi and n1.memory["memory"].reserved == Gi
    assert n1.memory["hugepages-1Gi"].free == Gi
    assert st.nodes[0] == initial.nodes[0]
    release_memory(st, blocks)
    assert st == initial


def test_allocate_cross_numa_carves_nodes_in_order():
    st = state_of((2 * Gi, 2 * Gi, 2 * Gi, 2 * Gi))
    blocks = allocate_memory(st, {"memory": 5 * Gi}, H([1, 2, 3], True))
    assert blocks == [Block((1, 2, 3), "memory", 5 * Gi)]
    assert [st.nodes[n].memory["memory"].free for n in range(4)] == [2 * Gi, 0, 0, Gi]
    assert all(st.nodes[n].cells == [1, 2, 3] for n in (1, 2, 3)) and st.nodes[0].cells == [0]


def test_nil_hint_uses_the_best_calculated_hint():
    st = state_of((Gi, 4 * Gi))
    blocks = allocate_memory(st, {"memory": 2 * Gi}, TopologyHint(None, False))
    assert blocks[0].numa_affinity == (1,)
    assert best_hint([H([0, 1], True), H([1], False), H([0], True)]) == H([0], True)


def test_hint_without_enough_memory_is_extended():
    st = state_of((Gi, Gi, 4 * Gi))
    # {0} cannot hold 1.5Gi; the best hint containing it is {0,1} (not preferred: {2} alone could)
    blocks = allocate_memory(st, {"memory": 3 * Gi // 2}, H([0], False))
    assert blocks[0].numa_affinity == (0, 1)


def test_allocation_error_texts():
    st = state_of((Gi, Gi, 4 * Gi))
    with pytest.raises(MemoryAllocationError, match=r"^\[memorymanager\] failed to find the extended preferred hint$"):
        allocate_memory(st.copy(), {"memory": 3 * Gi // 2}, H([0], True))
    grouped = state_of((2 * Gi, 2 * Gi, 2 * Gi))
    allocate_memory(grouped, {"memory": Gi}, H([0, 1], False))
    allocate_memory(grouped, {"memory": Gi}, H([2], True))
    # only {0,1} can take 1.5Gi now, and it is not preferred (one node could hold it when empty)
    assert calculate_hints(grouped, {"memory": 3 * Gi // 2}) == {"memory": [H([0, 1], False)]}
    with pytest.raises(MemoryAllocationError, match=r"^\[memorymanager\] failed to find the default preferred hint$"):
        allocate_memory(grouped, {"memory": 3 * Gi // 2}, TopologyHint(None, True))
    assert allocate_memory(grouped, {"memory": 3 * Gi // 2}, TopologyHint(None, False))[0].numa_affinity == (0, 1)
    busy = state_of((2 * Gi, 2 * Gi))
    allocate_memory(busy, {"memory": Gi}, H([0], True))
    with pytest.raises(MemoryAllocationError,
                       match=r"^\[memorymanager\] failed to find NUMA nodes to extend the current topology hint$"):
        allocate_memory(busy, {"memory": 3 * Gi // 2}, H([0], True))
    with pytest.raises(MemoryAllocationError,
                       match=r"^\[memorymanager\] preferred hint violates NUMA node allocation$"):
        allocate_memory(busy, {"memory": Gi}, H([0, 1], True))
    full = state_of((2 * Gi, 2 * Gi))
    allocate_memory(full, {"memory": 2 * Gi}, H([0], True))
    allocate_memory(full, {"memory": 2 * Gi}, H([1], True))
    with pytest.raises(MemoryAllocationError, match=r"^\[memorymanager\] failed to get the default NUMA affinity"):
        allocate_memory(full, {"memory": Gi}, None)


# -- per-node manager: reuse of init-container memory ------------------------------------------------

def test_manager_init_container_memory_is_reused_by_the_app_container():
    mm = MemoryManager.for_topology(machine((2 * Gi, 2 * Gi)))
    initial = mm.machine_state.copy()
    init = Container.guaranteed("init", 1000, 3 * Gi // 2, kind="init")
    app = Container.guaranteed("app", 1000, Gi)
    pod = Pod("p", [app], [init])
    mm.allocate(pod, init, H([0], True))
    assert mm.machine_state.nodes[0].memory["memory"].free == Gi // 2
    assert mm.reusable[pod.uid] == {"01": {"memory": 3 * Gi // 2}}
    # only 0.5Gi is free on NUMA 0, but the init container's 1.5Gi there is reusable
    assert mm.get_topology_hints(pod, app)["memory"][0] == H([0], True)
    carved = mm.allocate(pod, app, H([0], True))
    assert mm.blocks[(pod.uid, "app")] == [Block((0,), "memory", Gi)]
    assert carved.memory == {}, "the app container's memory was carved for the init container"
    assert mm.machine_state.nodes[0].memory["memory"].free == Gi // 2, "reused memory is not carved twice"
    assert mm.blocks[(pod.uid, "init")] == [Block((0,), "memory", Gi // 2)]
    assert mm.reusable[pod.uid]["01"]["memory"] == Gi // 2
    mm.remove_pod(pod.uid)
    assert mm.machine_state == initial and not mm.blocks


def test_manager_pod_scope_and_non_guaranteed():
    mm = MemoryManager.for_topology(machine())
    a, b = Container.guaranteed("a", 1000, Gi), Container.guaranteed("b", 1000, 2 * Gi)
    pod = Pod("p", [a, b])
    assert mm.get_pod_topology_hints(pod) == {"memory": [H([0], True), H([1], True), H([0, 1], False)]}
    mm.allocate(pod, a, H([1], True))
    # existing blocks are compared with the pod-level request (3Gi): mismatch -> None
    assert mm.get_pod_topology_hints(pod) is None
    assert mm.allocate(pod, a, H([0], True)).memory == {}, "allocation is idempotent"
    assert mm.blocks[(pod.uid, "a")] == [Block((1,), "memory", Gi)]
    burst = Pod("q", [Container("c", {"memory": Gi}, {"memory": 2 * Gi})])
    assert mm.allocate(burst, burst.containers[0], None).memory == {}
    assert mm.get_pod_topology_hints(burst) is None


def test_hint_calculation_on_16_numa_nodes():
    """Every mask of 3+ nodes is a hint (65k of them); the time is in `python -m scheduler_core.bench`."""
    st = state_of(tuple([8 * Gi] * 16))
    hints = calculate_hints(st, {"memory": 20 * Gi})
    assert hints["memory"][0] == H([0, 1, 2], True)
    assert len(hints["memory"]) == sum(1 for m in range(1, 1 << 16) if m.bit_count() >= 3)


def test_best_hint_ranks_a_nil_mask_as_the_widest_instead_of_failing():
    """findBestHint among hints one of which is nil ("any NUMA node"): it compared None.bit_count()."""
    nil = TopologyHint(None, True)
    assert best_hint([nil, H([1], True)]) == H([1], True)
    assert best_hint([H([1], True), nil]) == H([1], True)
    assert best_hint([nil, TopologyHint(None, True)]) is nil
