"""Koordinator NodeNUMAResource plugin vectors (tests/conformance/data/koordinator_plugin.json).

The Filter and Reserve tables of upstream's plugin_test.go: code, reason and the CPUs reserved
must be exactly upstream's."""

from __future__ import annotations

import pytest

from scheduler_core.koordinator.allocation import NodeOptions, PodAllocation
from scheduler_core.koordinator.cpu_accumulator import CPUTopology
from scheduler_core.koordinator.plugin import NRT_POLICIES, NodeNUMAResource, PodState, node_bind_policy, pre_filter
from scheduler_core.model.bitmask import mask_of
from scheduler_core.model.cpuset import CPUSet
from tests.conformance.test_koordinator_vectors import topology
from tests.conftest import load_vectors

CASES = load_vectors("koordinator_plugin")["cases"]


def plugin(node: dict, numa_scoring: str = "LeastAllocated") -> NodeNUMAResource:
    shape = node["topology"]
    topo = None if shape is None else CPUTopology({}) if not shape else topology(shape)
    labels = node["labels"]
    kubelet = node["kubelet_policy"] or {}
    full_only = kubelet.get("policy") == "static" and kubelet.get("options", {}).get("full-pcpus-only") == "true"
    opts = NodeOptions(topo, {int(n): res for n, res in node["numa_resources"].items()},
                       labels.get("node.koordinator.sh/numa-topology-policy", ""),
                       node_bind_policy(labels.get("node.koordinator.sh/cpu-bind-policy", ""), full_only),
                       strategy=labels.get("node.koordinator.sh/numa-allocate-strategy", ""))
    p = NodeNUMAResource({"test-node-1": opts}, numa_scoring=numa_scoring)
    if node.get("allocated"):
        p.record("test-node-1", PodAllocation("other", frozenset(CPUSet.parse(node["allocated"]))))
    for n, res in node.get("existing", {}).items():
        p.record("test-node-1", PodAllocation(f"existing-{n}", numa=((int(n), tuple(sorted(res.items()))),)))
    return p


def state(s: dict) -> PodState:
    return PodState(tuple(sorted(s["requests"].items())), s["num_cpus"], cpu_bind=s["cpu_bind"],
                    required_bind=s["required_bind"], preferred_bind=s["preferred_bind"])


def by_kind(kind: str) -> list:
    return [pytest.param(c, id=c["id"]) for c in CASES if c["kind"] == kind]


def test_every_case_has_its_source():
    for case in CASES:
        src = case["source"]
        assert src["repo"] == "koordinator-sh/koordinator" and len(src["commit"]) == 40, case["id"]
        assert src["file"].endswith("plugin_test.go") and case["id"] == f"{src['test']}/{src['case']}"
    assert len({c["id"] for c in CASES}) == len(CASES) == 40


def test_policies_read_from_nrt_are_upstreams():
    # convertToNUMATopologyPolicy: only these three topologyPolicies values map to a policy
    assert NRT_POLICIES == {"BestEffort": "BestEffort", "Restricted": "Restricted",
                            "SingleNUMANodePodLevel": "SingleNUMANode"}


@pytest.mark.parametrize("case", by_kind("filter"))
def test_filter(case):
    got = plugin(case["node"]).filter(state(case["state"]), "test-node-1", "pod")
    assert (got.code, got.reason) == (case["expected"]["code"], case["expected"]["reason"])


@pytest.mark.parametrize("case", by_kind("reserve"))
def test_reserve(case):
    p = plugin(case["node"])
    got = p.reserve(state(case["state"]), "test-node-1", "pod")
    exp = case["expected"]
    assert (got.code, got.reason) == (exp["code"], exp["reason"])
    held = p.allocs["test-node-1"].pods.get("pod")
    assert (held.cpus if held else frozenset()) == frozenset(CPUSet.parse(exp["cpus"]))


@pytest.mark.parametrize("case", by_kind("filter_numa_scoring"))
def test_filter_with_numa_node_scoring(case):
    got = plugin(case["node"], case["numa_scoring"]).filter(state(case["state"]), "test-node-1", "pod")
    assert got.code is None and got.hint == mask_of(case["expected"]["affinity"])


@pytest.mark.parametrize("case", by_kind("pre_filter"))
def test_pre_filter(case):
    got = pre_filter(case["requests"], case["meta"], case["default_bind"], case["priority"])
    exp = case["expected"]
    assert (got.skip, got.error, got.cpu_bind, got.required_bind, got.preferred_bind, got.num_cpus) == (
        exp["skip"], exp["error"], exp["cpu_bind"], exp["required_bind"], exp["preferred_bind"], exp["num_cpus"])
    if not exp["skip"]:
        assert dict(got.requests) == case["requests"]
