"""kubelet_cpu_hints.json: generateCPUTopologyHints (incl. regeneration from an existing allocation and
align-by-socket) and podGuaranteedCPUs (ENGINE.md §2.6)."""

import pytest

from scheduler_core.kubelet.cpumanager.topology_hints import container_cpu_hints, cpu_topology_hints
from scheduler_core.kubelet.topologymanager.hint import TopologyHint
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.pods import INIT, SIDECAR, Container, Pod, pod_guaranteed_cpus
from scheduler_core.model.quantity import cpu_milli
from scheduler_core.model.topology import Topology
from tests.conftest import load_vectors

DATA = load_vectors("kubelet_cpu_hints")
TOPOLOGIES = {name: Topology.from_dict({"cpus": t["cpus"], "header": t["header"]})
              for name, t in DATA["topologies"].items()}


def _cases(kind):
    cases = [c for c in DATA["cases"] if c["kind"] == kind]
    return pytest.mark.parametrize("case", cases, ids=[c["id"] for c in cases])


def _mask(ids):
    return sum(1 << i for i in ids)


def _expected_hints(case):
    return [TopologyHint(_mask(h["affinity"]), h["preferred"]) for h in case["expected"]]


@_cases("cpu_topology_hints")
def test_cpu_topology_hints(case):
    topo = TOPOLOGIES[case["topology"]]
    by_socket = case["options"]["align_by_socket"]
    allocated = case["already_allocated"]
    if allocated is not None and len(allocated) != case["request"]:
        got = []
    elif allocated is not None:
        got = cpu_topology_hints(topo, CPUSet(allocated), CPUSet(), case["request"], by_socket)
    else:
        got = cpu_topology_hints(topo, CPUSet(case["available"]), CPUSet(case["reusable"]), case["request"],
                                 by_socket)
    assert got == _expected_hints(case)  # generation (IterateBitMasks) order, as listed


@_cases("cpu_topology_hints")
def test_cpu_topology_hints_through_container_scope(case):
    """The same vectors through the container-scope entry point (pod Guaranteed, request = case)."""
    topo = TOPOLOGIES[case["topology"]]
    c = Container.guaranteed("c", cpu_milli=case["request"] * 1000, memory=1 << 30)
    pod = Pod("p", (c,))
    allocated = case["already_allocated"]
    assignments = {"c": CPUSet(allocated)} if allocated is not None else None
    got = container_cpu_hints(topo, pod, c, CPUSet(case["available"]), CPUSet(), assignments,
                              CPUSet(case["reusable"]), {"align-by-socket": case["options"]["align_by_socket"]})
    assert got == {"cpu": _expected_hints(case)}


def _container(spec, name, kind):
    requests = {"cpu": cpu_milli(spec["cpu_request"]), "memory": 10**9}
    limits = {"cpu": cpu_milli(spec["cpu_limit"]), "memory": 10**9}
    return Container(name, requests, limits, kind)


@_cases("pod_guaranteed_cpus")
def test_pod_guaranteed_cpus(case):
    inits = tuple(_container(s, f"init{i}", SIDECAR if s["restartable"] else INIT)
                  for i, s in enumerate(case["init_containers"]))
    apps = tuple(_container(s, f"app{i}", "app") for i, s in enumerate(case["containers"]))
    pod = Pod("p", apps, inits, qos=case["pod_qos"])
    assert pod_guaranteed_cpus(pod) == case["expected"]["result"]
