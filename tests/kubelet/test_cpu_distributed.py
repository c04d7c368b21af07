"""The branch-and-bound distributed CPU selection makes the kubelet's exhaustive choice: property
tests against the exhaustive version (tests/kubelet/distributed_reference.py) on random free counts
and on random machines of up to 8 NUMA nodes, and the exact balance score against Go's float64
formula."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.bench import bench_distributed
from scheduler_core.errors import InsufficientResourcesError
from scheduler_core.kubelet.cpumanager.cpu_assignment import take_by_topology_numa_distributed
from scheduler_core.kubelet.cpumanager.cpu_distributed import balance_milli, select_numa_nodes, standard_deviation
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.topology import Topology, synthetic
from tests.conftest import load_vectors
from tests.kubelet.distributed_reference import exhaustive_choice, float_standard_deviation, take_distributed

VEC = load_vectors("kubelet_take_by_topology")
FIXTURES = [Topology.from_dict({"cpus": t["cpus"], "header": t["header"]}) for t in VEC["topologies"].values()]
FIXTURES = [t for t in FIXTURES if len(t.cpu_numa_ids) <= 8]


@st.composite
def free_counts(draw):
    """Free CPUs per NUMA node in accumulator order (often sorted, with runs of equal counts), a
    request that is a multiple of the group size, and the machine totals."""
    size = draw(st.integers(1, 8))
    per_numa = draw(st.sampled_from([2, 4, 6, 8, 12, 16]))
    counts = draw(st.lists(st.integers(1, per_numa), min_size=size, max_size=size))
    if draw(st.booleans()):
        counts.sort()
    group = draw(st.sampled_from([1, 1, 2, 3]))
    total_numa = size + draw(st.integers(0, 2))
    total_cpus = total_numa * per_numa
    n = group * draw(st.integers(1, max(1, sum(counts) // group)))
    return counts, n, group, total_numa, total_cpus


@given(free_counts())
@settings(max_examples=400, deadline=None)
def test_choice_equals_exhaustive_search(case):
    counts, n, group, total_numa, total_cpus = case
    expected = exhaustive_choice(counts, n, group, total_numa, total_cpus)
    got = select_numa_nodes(counts, n, group, total_numa, total_cpus)
    if expected is not None:
        expected = (tuple(expected[0]), None if expected[1] is None else tuple(expected[1]))
    assert got == expected


@st.composite
def machines(draw):
    """A conformance fixture or a synthetic machine of up to 8 NUMA nodes, with CPUs taken at random
    (whole NUMA nodes, whole cores or single threads)."""
    if draw(st.booleans()):
        topo = draw(st.sampled_from(FIXTURES))
    else:
        sockets = draw(st.integers(1, 2))
        topo = synthetic(sockets, draw(st.integers(1, 8 // sockets)), draw(st.integers(1, 6)), draw(st.integers(1, 2)))
    cpus = sorted(topo.cpuset())
    busy = draw(st.sets(st.sampled_from(cpus), max_size=len(cpus)))
    for nid in draw(st.sets(st.sampled_from(sorted(topo.cpu_numa_ids)))):
        busy |= set(CPUSet(topo.numa_cpus[nid]))
    return topo, CPUSet(set(cpus) - busy)


@given(machines(), st.integers(1, 200), st.sampled_from([1, 1, 2]), st.sampled_from(["packed", "spread"]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_selection_equals_exhaustive_version_on_random_machines(machine, n, group, strategy):
    topo, available = machine
    n = min(n, len(available) or 1)
    try:
        expected = take_distributed(topo, available, n, group, strategy)
    except InsufficientResourcesError as error:
        try:
            take_by_topology_numa_distributed(topo, available, n, group, strategy)
        except InsufficientResourcesError as got:
            assert str(got) == str(error)
            return
        raise AssertionError("the fast version allocated where the exhaustive one failed") from error
    assert take_by_topology_numa_distributed(topo, available, n, group, strategy) == expected


def test_large_empty_machine_spreads_evenly():
    """100 CPUs on an empty 24-NUMA, 384-thread machine (the case the exhaustive search needs minutes
    for): the fewest NUMA nodes that can hold it (7), 14 CPUs each and the 2 left over on two of them."""
    topo = synthetic(2, 12, 8, 2)
    got = take_by_topology_numa_distributed(topo, topo.cpuset(), 100)
    per_numa = sorted((got.mask & topo.numa_cpus[nid]).bit_count() for nid in topo.cpu_numa_ids)
    assert per_numa == [0] * 17 + [14] * 5 + [15] * 2


@given(st.lists(st.integers(0, 64), min_size=1, max_size=24))
@settings(max_examples=500, deadline=None)
def test_exact_score_matches_the_float_formula(values):
    assert standard_deviation(values) == float_standard_deviation(values)


def test_score_is_monotone_in_the_sum_of_squares():
    # Same total, more spread: a higher or equal score.
    assert balance_milli(3, 6, 12) == 0
    assert balance_milli(3, 6, 14) <= balance_milli(3, 6, 18) <= balance_milli(3, 6, 36)
    assert standard_deviation([1, 0, 0]) == 0.471
    assert standard_deviation([]) == 0.0


def test_bench_reports_milliseconds_per_call():
    rows = bench_distributed()
    assert [label for label, _ in rows][:3] == ["empty, 80 CPUs", "empty, 100 CPUs", "empty, 112 CPUs"]
    assert all(ms > 0 for _, ms in rows)
