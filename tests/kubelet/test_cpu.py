"""CPU Manager static policy: seeds' worked examples, container/pod hint entry points, reserved CPUs,
SMT alignment, allocate_cpus, bad input, and a cross-check of the mask-based selection against a
slow, literal transcription of ENGINE.md §2.7 on random free sets."""

import random

import pytest

from scheduler_core.bench import bench_take_by_topology
from scheduler_core.errors import CPUSetError, EngineError, InsufficientResourcesError, PolicyError, RequestError
from scheduler_core.kubelet.cpumanager.cpu_assignment import (
    accumulator_order,
    take_by_topology,
    take_by_topology_numa_distributed,
    take_by_topology_numa_packed,
)
from scheduler_core.kubelet.cpumanager.cpu_distributed import standard_deviation
from scheduler_core.kubelet.cpumanager.cpu_manager import (
    SMTAlignmentError,
    allocate_container,
    allocate_cpus,
    check_smt_alignment,
    reserved_cpu_set,
    reserved_physical_cpus,
    update_cpus_to_reuse,
    validate_static_options,
)
from scheduler_core.kubelet.cpumanager.topology_hints import container_cpu_hints, cpu_topology_hints, pod_cpu_hints
from scheduler_core.kubelet.topologymanager.hint import TopologyHint
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.kubelet_config import CPUOptions
from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.topology import Topology, synthetic
from tests.conftest import load_vectors

VEC = load_vectors("kubelet_take_by_topology")
TOPOS = {name: Topology.from_dict({"cpus": t["cpus"], "header": t["header"]})
         for name, t in VEC["topologies"].items()}
GIB = 1 << 30


def H(nodes, preferred):
    return TopologyHint(sum(1 << n for n in nodes), preferred)


def two_numa_four_cpus():
    """2 sockets = 2 NUMA nodes × 4 single-thread cores: NUMA 0 = CPUs 0-3, NUMA 1 = CPUs 4-7."""
    topo = synthetic(2, 1, 4, 1)
    assert topo.cpus_in_numa([0]) == CPUSet.parse("0-3") and topo.cpus_in_numa([1]) == CPUSet.parse("4-7")
    return topo


# -- seeds ------------------------------------------------------------------------------------------

def test_seed000_section11_three_cpus_on_numa1():
    """Seed 000 §11: CPUs 0,1 busy, 3-CPU task → [{NUMA1, preferred}, {NUMA0+1, not preferred}], CPUs {4,5,6}."""
    topo = two_numa_four_cpus()
    free = CPUSet.parse("2-7")
    hints = cpu_topology_hints(topo, free, CPUSet(), 3)
    assert hints == [H([1], True), H([0, 1], False)]
    assert allocate_cpus(topo, 3, [1], free) == CPUSet([4, 5, 6])


def test_seed000_section11_single_numa_impossible_when_numa1_has_two_free():
    """Only 2 free on NUMA 1 (and 2 on NUMA 0): no single-NUMA hint is left, the cross-NUMA one is not
    preferred — what makes single-numa-node reject the node."""
    topo = two_numa_four_cpus()
    hints = cpu_topology_hints(topo, CPUSet.parse("2-3,6-7"), CPUSet(), 3)
    assert hints == [H([0, 1], False)]


def test_seed003_two_free_cpus_on_different_numa_nodes():
    """Seed 003: 2 free CPUs on different NUMA nodes, 2 requested → only {11: False}."""
    topo = two_numa_four_cpus()
    assert cpu_topology_hints(topo, CPUSet([3, 7]), CPUSet(), 2) == [H([0, 1], False)]


def test_seed003_container0_and_container1_cpu_side():
    """Seed 003: Container0 and Container1 (2 CPUs each) both see cpu [{01: T}, {10: T}, {11: F}];
    Container0 aligned on NUMA 0 gets {0,1}, Container1 aligned on NUMA 1 gets {4,5}."""
    topo = two_numa_four_cpus()
    c0 = Container.guaranteed("container0", cpu_milli=2000, memory=GIB)
    c1 = Container.guaranteed("container1", cpu_milli=2000, memory=GIB)
    pod = Pod("pod", (c0, c1))
    default = topo.cpuset()
    expected = {"cpu": [H([0], True), H([1], True), H([0, 1], False)]}
    assert container_cpu_hints(topo, pod, c0, default) == expected
    got0 = allocate_cpus(topo, 2, [0], default)
    assert got0 == CPUSet([0, 1])
    default -= got0
    assert container_cpu_hints(topo, pod, c1, default, assignments={"container0": got0}) == expected
    assert allocate_cpus(topo, 2, [1], default) == CPUSet([4, 5])


# -- container and pod scope ---------------------------------------------------------------------

def test_container_hints_none_for_shared_pool_containers():
    topo = two_numa_four_cpus()
    frac = Container.guaranteed("c", cpu_milli=1500, memory=GIB)
    assert container_cpu_hints(topo, Pod("p", (frac,)), frac, topo.cpuset()) is None
    burst = Container("b", {"cpu": 2000}, {"cpu": 4000})
    assert container_cpu_hints(topo, Pod("q", (burst,)), burst, topo.cpuset()) is None


def test_container_hints_regenerated_from_existing_assignment():
    topo = two_numa_four_cpus()
    c = Container.guaranteed("c", cpu_milli=2000, memory=GIB)
    pod = Pod("p", (c,))
    assert container_cpu_hints(topo, pod, c, CPUSet(), assignments={"c": CPUSet([4, 5])}) == {
        "cpu": [H([1], True), H([0, 1], False)]}
    assert container_cpu_hints(topo, pod, c, topo.cpuset(), assignments={"c": CPUSet([4, 5, 6])}) == {"cpu": []}


def test_container_hints_subtract_reserved_and_honour_reusable():
    topo = two_numa_four_cpus()
    c = Container.guaranteed("c", cpu_milli=3000, memory=GIB)
    pod = Pod("p", (c,))
    # Reserved 0-1 leaves 2 on NUMA 0: only NUMA 1 fits alone.
    got = container_cpu_hints(topo, pod, c, topo.cpuset(), reserved=CPUSet([0, 1]))
    assert got == {"cpu": [H([1], True), H([0, 1], False)]}
    # A reusable CPU on NUMA 0 forbids every mask without NUMA 0.
    got = container_cpu_hints(topo, pod, c, CPUSet.parse("4-7"), reusable=CPUSet([2]))
    assert got == {"cpu": [H([0, 1], False)]}
    # Nothing fits → an empty list, not None.
    assert container_cpu_hints(topo, pod, c, CPUSet([0, 4])) == {"cpu": []}


def test_pod_scope_uses_free_pool_and_assigned_cpus_as_reusable():
    topo = two_numa_four_cpus()
    a = Container.guaranteed("a", cpu_milli=2000, memory=GIB)
    b = Container.guaranteed("b", cpu_milli=2000, memory=GIB)
    pod = Pod("p", (a, b))
    default = CPUSet.parse("2-3,6-7")  # 0-1 held by another pod, 4-5 by container a
    got = pod_cpu_hints(topo, pod, default, assignments={"a": CPUSet([4, 5])})
    assert got == {"cpu": [H([1], True), H([0, 1], False)]}
    # Everything already assigned: hints from the assignment itself.
    got = pod_cpu_hints(topo, pod, CPUSet(), assignments={"a": CPUSet([4, 5]), "b": CPUSet([6, 7])})
    assert got == {"cpu": [H([1], True), H([0, 1], False)]}
    # A container holding the wrong number of CPUs → cannot be satisfied.
    assert pod_cpu_hints(topo, pod, default, assignments={"a": CPUSet([4])}) == {"cpu": []}
    # No exclusive CPUs at pod level → no preference.
    shared = Container.guaranteed("s", cpu_milli=500, memory=GIB)
    assert pod_cpu_hints(topo, Pod("q", (shared,)), default) is None


def test_pod_scope_counts_init_containers_by_pod_level_rule():
    topo = two_numa_four_cpus()
    init = Container.guaranteed("init", cpu_milli=4000, memory=GIB, kind="init")
    app = Container.guaranteed("app", cpu_milli=1000, memory=GIB)
    pod = Pod("p", (app,), (init,))
    got = pod_cpu_hints(topo, pod, CPUSet.parse("1-7"))
    assert got == {"cpu": [H([1], True), H([0, 1], False)]}


def test_align_by_socket_preferred_rule():
    topo = TOPOS["topoDualSocketMultiNumaPerSocketHT"]
    hints = cpu_topology_hints(topo, CPUSet([2, 3, 11]), None, 2, align_by_socket=True)
    assert H([0, 1], True) in hints and H([0, 2], False) in hints


# -- take_by_topology ------------------------------------------------------------------------------

def test_spread_walks_sockets_one_thread_per_core():
    topo = TOPOS["topoDualSocketHT"]
    assert take_by_topology(topo, topo.cpuset(), 8, {"distribute-cpus-across-cores": "true"}) == CPUSet.parse(
        "0-4,6,8,10")


def test_dispatch_distributed_with_full_pcpus_groups_siblings():
    topo = TOPOS["topoDualSocketMultiNumaPerSocketHT"]
    grouped = take_by_topology(topo, topo.cpuset(), 26, CPUOptions(distribute_cpus_across_numa=True,
                                                                      full_pcpus_only=True))
    single = take_by_topology(topo, topo.cpuset(), 26, CPUOptions(distribute_cpus_across_numa=True))
    assert grouped == CPUSet.parse("0-6,10-15,40-46,50-55")
    assert single == CPUSet.parse("0-6,10-16,40-45,50-55")


def test_distributed_intended_semantics_on_large_fixture():
    """ENGINE.md §2.7: the selected combo NUMA {0,1,2,3} is used (no Go slice aliasing)."""
    topo = TOPOS["topoDualSocketMultiNumaPerSocketHTLarge"]
    got = take_by_topology_numa_distributed(topo, topo.cpuset(), 128, 1)
    assert got == CPUSet.parse("0-63,128-191")


def test_distributed_odd_request_with_groups_falls_back_to_packed():
    topo = TOPOS["topoDualSocketMultiNumaPerSocketHT"]
    avail = CPUSet.parse("1-79")
    assert take_by_topology_numa_distributed(topo, avail, 3, 2) == take_by_topology_numa_packed(topo, avail, 3)


def test_uncore_tbt024_walkthrough():
    topo = TOPOS["topoUncoreSingleSocketSMT"]
    got = take_by_topology(topo, CPUSet.parse("1-7,9-15"), 10, {"prefer-align-cpus-by-uncorecache": True})
    assert got == CPUSet.parse("1,4-7,9,12-15")


def test_standard_deviation_rounds_half_away_from_zero():
    assert standard_deviation([1, 2]) == 0.5
    assert standard_deviation([0, 0, 0]) == 0.0
    assert standard_deviation([2, 4, 4, 4, 5, 5, 7, 9]) == 2.0
    # mean 1/3 → 0.333; var ((1-.333)^2 + 2*.333^2)/3 → sqrt = 0.4714 → 0.471
    assert standard_deviation([1, 0, 0]) == 0.471


def test_accumulator_order_sockets_first_numa_order():
    topo = TOPOS["topoDualSocketMultiNumaPerSocketHT"]
    avail = topo.cpuset() - CPUSet([0])
    assert accumulator_order(topo, avail, "sorted_numa_nodes") == [0, 1, 2, 3]
    assert accumulator_order(topo, avail, "free_numa_nodes") == [1, 2, 3]
    assert accumulator_order(topo, avail, "sorted_sockets") == [0, 1]


# -- reserved CPUs, SMT alignment, allocate_cpus ---------------------------------------------------

def test_reserved_cpus_chosen_by_take_by_topology():
    topo = TOPOS["topoSingleSocketHT"]
    assert reserved_cpu_set(topo, reserved_cpu_milli=1500) == CPUSet([0, 4])
    assert reserved_cpu_set(topo, reserved_cpus=CPUSet([3])) == CPUSet([3])


def test_reserved_cpus_errors():
    topo = TOPOS["topoSingleSocketHT"]
    with pytest.raises(PolicyError, match="unable to determine reserved CPU resources"):
        reserved_cpu_set(topo)
    with pytest.raises(InsufficientResourcesError) as info:
        reserved_cpu_set(topo, reserved_cpu_milli=9000)
    assert str(info.value) == "[cpumanager] unable to reserve the required amount of CPUs (size of  did not equal 9)"
    with pytest.raises(CPUSetError, match="12"):
        reserved_cpu_set(topo, reserved_cpus=CPUSet([12]))


def test_smt_alignment_errors():
    topo = TOPOS["topoSingleSocketHT"]
    opts = CPUOptions(full_pcpus_only=True)
    with pytest.raises(SMTAlignmentError) as info:
        check_smt_alignment(topo, 3, topo.cpuset(), CPUSet(), opts)
    assert str(info.value) == "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"
    assert info.value.reason == "SMTAlignmentError" and isinstance(info.value, EngineError)
    assert reserved_physical_cpus(topo, CPUSet([0])) == CPUSet([0, 4])
    with pytest.raises(SMTAlignmentError) as info:
        check_smt_alignment(topo, 8, topo.cpuset(), CPUSet([0]), opts)
    assert str(info.value) == ("SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 6, "
                               "requested CPUs = 8, CPUs per core = 2")
    check_smt_alignment(topo, 6, topo.cpuset(), CPUSet([0]), opts)
    check_smt_alignment(topo, 3, topo.cpuset(), CPUSet(), CPUOptions())


def test_allocate_cpus_align_by_socket_widens_to_the_socket():
    topo = TOPOS["topoDualSocketMultiNumaPerSocketHT"]
    default = topo.cpus_in_numa([0, 1]) | CPUSet([20, 21, 60, 61])
    plain = allocate_cpus(topo, 24, [0], default)
    assert plain == topo.cpus_in_numa([0]) | CPUSet([20, 21, 60, 61])
    by_socket = allocate_cpus(topo, 24, [0], default, options={"align-by-socket": "true"})
    assert by_socket == topo.cpus_in_numa([0]) | CPUSet([10, 11, 50, 51])


def test_allocate_cpus_uses_reusable_and_skips_reserved():
    topo = two_numa_four_cpus()
    got = allocate_cpus(topo, 3, [1], CPUSet.parse("0-3,6-7"), reserved=CPUSet([0]), reusable=CPUSet([5]))
    assert got == CPUSet([5, 6, 7])
    with pytest.raises(InsufficientResourcesError) as info:
        allocate_cpus(topo, 4, None, CPUSet.parse("0-3"), reserved=CPUSet([0]))
    assert str(info.value) == "not enough cpus available to satisfy request: requested=4, available=3"


# -- bad input -------------------------------------------------------------------------------------

def test_request_larger_than_machine():
    topo = TOPOS["topoSingleSocketHT"]
    with pytest.raises(InsufficientResourcesError) as info:
        take_by_topology(topo, topo.cpuset(), 9)
    assert str(info.value) == "not enough cpus available to satisfy request: requested=9, available=8"
    assert cpu_topology_hints(topo, topo.cpuset(), None, 9) == []


@pytest.mark.parametrize("bad", [-1, -8])
def test_negative_counts(bad):
    topo = TOPOS["topoSingleSocketHT"]
    for call in (lambda: take_by_topology(topo, topo.cpuset(), bad),
                 lambda: cpu_topology_hints(topo, topo.cpuset(), None, bad),
                 lambda: allocate_cpus(topo, bad, None, topo.cpuset()),
                 lambda: reserved_cpu_set(topo, reserved_cpu_milli=bad)):
        with pytest.raises(RequestError, match=str(bad)):
            call()


def test_other_bad_input():
    topo = TOPOS["topoSingleSocketHT"]
    with pytest.raises(RequestError, match=r"2\.5"):
        take_by_topology(topo, topo.cpuset(), 2.5)
    with pytest.raises(RequestError, match="True"):
        take_by_topology(topo, topo.cpuset(), True)
    with pytest.raises(CPUSetError, match="8-9"):
        take_by_topology(topo, CPUSet.parse("0-9"), 2)
    with pytest.raises(PolicyError, match="no-such-option"):
        take_by_topology(topo, topo.cpuset(), 2, {"no-such-option": "true"})
    with pytest.raises(PolicyError, match="diagonal"):
        take_by_topology_numa_packed(topo, topo.cpuset(), 2, "diagonal")
    with pytest.raises(RequestError, match="0"):
        take_by_topology_numa_distributed(topo, topo.cpuset(), 2, 0)
    with pytest.raises(RequestError, match="free_gpus"):
        accumulator_order(topo, topo.cpuset(), "free_gpus")
    with pytest.raises(RequestError, match="99"):
        allocate_cpus(topo, 1, [99], topo.cpuset())
    with pytest.raises(EngineError, match="dict"):
        take_by_topology({}, CPUSet(), 1)


def test_bench_reports_microseconds():
    rows = bench_take_by_topology(repeat=2)
    assert len(rows) >= 8
    assert all(isinstance(label, str) and us > 0 for label, us in rows)


# -- cross-check against a literal transcription of ENGINE.md §2.7 -------------------------------------------

class RefAccumulator:
    """ENGINE.md §2.7 written with Python sets and sorted lists, no shortcuts."""

    def __init__(self, topo, avail, need, spread):
        self.topo, self.details, self.need, self.result, self.spread = topo, set(avail), need, set(), spread

    def take(self, cpus):
        self.result |= set(cpus)
        self.details -= self.result
        self.need -= len(cpus)

    def _cpus(self, attr, ident, pool=None):
        pool = self.details if pool is None else pool
        return {c for c in pool if getattr(self.topo.cpu_info[c], attr) == ident}

    def _sort(self, ids, attr):
        return sorted(ids, key=lambda i: (len(self._cpus(attr, i)), i))

    def _ids(self, attr, within_attr=None, within=None):
        return {getattr(self.topo.cpu_info[c], attr) for c in self.details
                if within_attr is None or getattr(self.topo.cpu_info[c], within_attr) == within}

    def numas(self):
        if self.topo.numa_first:
            return self._sort(self._ids("numa"), "numa")
        return [n for s in self.sockets() for n in self._sort(self._ids("numa", "socket", s), "numa")]

    def sockets(self):
        if not self.topo.numa_first:
            return self._sort(self._ids("socket"), "socket")
        return [s for n in self.numas() for s in self._sort(self._ids("socket", "numa", n), "socket")]

    def cores(self):
        if self.topo.numa_first:
            return [c for s in self.sockets() for c in self._sort(self._ids("core", "socket", s), "core")]
        return [c for n in self.numas() for c in self._sort(self._ids("core", "numa", n), "core")]

    def uncores(self):
        return [u for n in self.numas() for u in self._sort(self._ids("uncore", "numa", n), "uncore")]

    def cpus(self):
        if self.spread:
            return [c for s in self.sockets() for c in sorted(self._cpus("socket", s))]
        return [c for k in self.cores() for c in sorted(self._cpus("core", k))]

    def full(self, attr, units, free_size):
        for u in units:
            if len(self._cpus(attr, u)) != free_size(u):
                continue
            whole = self._cpus(attr, u, self.topo.cpu_info)
            if self.need >= len(whole):
                self.take(whole)

    def run(self, uncore):
        t = self.topo
        numa_total = lambda n: len(self._cpus("numa", n, t.cpu_info))  # noqa: E731
        uncore_total = lambda u: len(self._cpus("uncore", u, t.cpu_info))  # noqa: E731
        levels = [("numa", self.numas, numa_total), ("socket", self.sockets, lambda s: t.cpus_per_socket)]
        if not t.numa_first:
            levels.reverse()
        if self.need < 1:
            return set()
        if self.need > len(self.details):
            raise InsufficientResourcesError("not enough")
        for attr, order, size in levels:
            self.full(attr, order(), size)
            if self.need < 1:
                return self.result
        if uncore:
            for u in self.uncores():
                if self.need >= t.cpus_per_uncore:
                    self.full("uncore", self.uncores(), uncore_total)
                if self.need < 1:
                    return self.result
                cpc = t.cpus_per_core
                cores = sorted(self._ids("core", "uncore", u))[:-(-self.need // cpc)]
                cpus = sorted(c for k in cores for c in self._cpus("core", k))
                if self.need % 2 and cpc > 1 and len(cpus) > self.need:
                    cpus = cpus[:-1]
                if len(cpus) == self.need:
                    self.take(cpus)
                if self.need < 1:
                    return self.result
        if not self.spread:
            self.full("core", self.cores(), lambda c: t.cpus_per_core)
            if self.need < 1:
                return self.result
        for c in self.cpus():
            self.take([c])
            if self.need < 1:
                return self.result
        raise InsufficientResourcesError("failed to allocate cpus")


@pytest.mark.parametrize("name", sorted(TOPOS))
def test_packed_matches_literal_reference(name):
    topo = TOPOS[name]
    rng = random.Random(name)
    cpus = topo.cpuset().sorted()
    for _ in range(60 if len(cpus) < 100 else 15):
        avail = [c for c in cpus if rng.random() < rng.choice((0.3, 0.7, 0.95))]
        n = rng.randint(0, len(avail))
        for spread, uncore in ((False, False), (True, False), (False, True)):
            ref = RefAccumulator(topo, avail, n, spread).run(uncore)
            got = take_by_topology_numa_packed(topo, CPUSet(avail), n, "spread" if spread else "packed", uncore)
            assert got == CPUSet(ref), (name, avail, n, spread, uncore)
        acc = RefAccumulator(topo, avail, 0, False)
        assert accumulator_order(topo, CPUSet(avail), "free_cpus") == acc.cpus()
        assert accumulator_order(topo, CPUSet(avail), "sorted_cores") == acc.cores()
        assert accumulator_order(topo, CPUSet(avail), "sorted_uncore_caches") == acc.uncores()


# -- Allocate for a container, reuse bookkeeping, option validation --------------------------------

def test_allocate_container_checks_smt_then_allocates():
    topo = TOPOS["topoSingleSocketHT"]
    opts = CPUOptions(full_pcpus_only=True)
    c3 = Container.guaranteed("c3", cpu_milli=3000, memory=GIB)
    with pytest.raises(SMTAlignmentError, match="requested 3 cpus"):
        allocate_container(topo, Pod("p", (c3,)), c3, None, topo.cpuset(), CPUSet([0]), options=opts)
    c2 = Container.guaranteed("c2", cpu_milli=2000, memory=GIB)
    # Reserved CPU 0: the allocation draws from the rest, a whole core.
    assert allocate_container(topo, Pod("p", (c2,)), c2, None, topo.cpuset(), CPUSet([0]), options=opts) == CPUSet(
        [1, 5])
    shared = Container.guaranteed("s", cpu_milli=1500, memory=GIB)
    assert allocate_container(topo, Pod("q", (shared,)), shared, None, topo.cpuset()) == CPUSet()


def test_update_cpus_to_reuse():
    init = Container.guaranteed("i", cpu_milli=2000, memory=GIB, kind="init")
    side = Container.guaranteed("s", cpu_milli=1000, memory=GIB, kind="sidecar")
    app = Container.guaranteed("a", cpu_milli=2000, memory=GIB)
    pool = update_cpus_to_reuse(init, CPUSet([1, 2]), CPUSet())
    assert pool == CPUSet([1, 2])
    assert update_cpus_to_reuse(side, CPUSet([1]), pool) == CPUSet([2])
    assert update_cpus_to_reuse(app, CPUSet([1, 2]), pool) == CPUSet()


def test_validate_static_options_align_by_socket():
    multi_socket_numa = TOPOS["fakeTopoMultiSocketDualSocketPerNumaHT"]
    with pytest.raises(PolicyError, match="Align by socket"):
        validate_static_options(multi_socket_numa, {"align-by-socket": "true"})
    assert validate_static_options(TOPOS["topoDualSocketMultiNumaPerSocketHT"],
                                   {"align-by-socket": "true"}).align_by_socket
