"""scheduler-plugins NodeResourceTopologyMatch vectors (tests/conformance/data/nrt_*.json; ENGINE.md §3.9).

Each case is one of upstream's unit-test table entries, transcribed with its source; statuses (code
and message), scores and NUMA sets must match exactly.
"""

from __future__ import annotations

import pytest

from scheduler_core.model.pods import Container, Pod
from scheduler_core.model.quantity import count, cpu_milli
from scheduler_core.nrt.cache import OverReserve
from scheduler_core.nrt.filter import filter_pod, take_from_zone
from scheduler_core.nrt.score import (
    least_numa_score,
    min_avg_distance,
    numa_nodes_required,
    only_non_numa,
    score_pod,
    subtract_from_zones,
)
from scheduler_core.nrt.zones import MAX_NUMA_ID, PodView, TopologyManagerConf, Zone, is_host_level, is_numa_affine
from tests.conftest import load_vectors


def amount(resource: str, quantity: str) -> int:
    return cpu_milli(quantity) if resource == "cpu" else count(quantity)


def amounts(values: dict[str, str]) -> dict[str, int]:
    return {r: amount(r, q) for r, q in values.items()}


def zones_of(nrt: dict) -> list[Zone]:
    """createNUMANodeList: `type: Node` zones named node-<id>, ids above 64 dropped, available amounts."""
    zones = []
    for z in nrt["zones"]:
        if z["type"] != "Node" or not z["name"].startswith("node-"):
            continue
        nid = int(z["name"][5:])
        if nid > MAX_NUMA_ID:
            continue
        costs = {int(n[5:]): v for n, v in z.get("costs", {}).items() if n.startswith("node-")}
        zones.append(Zone(nid, {r: amount(r, v["available"]) for r, v in z["resources"].items()}, costs))
    return zones


def pod_of(spec: dict) -> Pod:
    def cont(c: dict, name: str, kind: str) -> Container:
        return Container(name, amounts(c["requests"]), amounts(c["limits"]), kind)
    apps = tuple(cont(c, f"cnt-{i + 1}", "app") for i, c in enumerate(spec["containers"]))
    return Pod(spec.get("name") or "pod", apps,
               tuple(cont(c, f"init-{i + 1}", "init") for i, c in enumerate(spec["init_containers"])),
               namespace=spec.get("namespace") or "default")


FILTER = load_vectors("nrt_filter")["cases"]


def test_filter_vectors_are_all_there() -> None:
    assert len(FILTER) == 71
    assert all(c["source"].startswith("kubernetes-sigs/scheduler-plugins@903da7df82cb:") for c in FILTER)


@pytest.mark.parametrize("case", FILTER, ids=[c["id"] for c in FILTER])
def test_filter(case: dict) -> None:
    nrt, want = case["input"]["nrt"], case["expected"]
    conf = TopologyManagerConf.from_nrt(nrt["attributes"], nrt["topology_policies"])
    allocatable = {r for z in nrt["zones"] for r in z["resources"]} | set(nrt.get("node_extra", {}))
    got = filter_pod(PodView.of(pod_of(case["input"]["pod"])), zones_of(nrt), conf, allocatable)
    if want is None:
        assert got.passed, got.explain()
    else:
        assert (got.code, got.reason) == (want["code"], want["reason"])


LEAST_NUMA = load_vectors("nrt_least_numa")["cases"]


def zone_list(zones: list[dict]) -> list[Zone]:
    return [Zone(z["numa_id"], amounts(z["resources"]), {int(k): v for k, v in z["costs"].items()}) for z in zones]


@pytest.mark.parametrize("case", LEAST_NUMA, ids=[c["id"] for c in LEAST_NUMA])
def test_least_numa(case: dict) -> None:
    given, want = case["input"], case["expected"]
    if case["kind"] == "numa_nodes_required":
        ids, closest = numa_nodes_required(zone_list(given["zones"]), given["qos"] == "Guaranteed",
                                           amounts(given["requests"]))
        assert (None if ids is None else sorted(ids)) == want["numa"]
        assert closest == want["min_distance"]
    elif case["kind"] == "normalize_score":
        got = least_numa_score(given["numa_nodes"], given["optimal_distance"], given["max_numa_nodes"])
        assert got == want["score"]
    else:
        got = min_avg_distance(zone_list(given["zones"]), given["combinations"])
        assert got == pytest.approx(want["distance"], rel=1e-6)


SCORE = load_vectors("nrt_score")["cases"]


@pytest.mark.parametrize("case", SCORE, ids=[c["id"] for c in SCORE])
def test_score(case: dict) -> None:
    given, want = case["input"], case["expected"]
    pod = PodView.of(pod_of(given["pod"]))
    scores = {}
    for nrt in given["nrts"]:
        conf = TopologyManagerConf.from_nrt(nrt["attributes"], nrt["topology_policies"])
        zones = None if nrt.get("absent") else zones_of(nrt)
        scores[nrt["name"]] = score_pod(pod, zones, conf, given["strategy"], {})
    if case["kind"] == "scores":
        assert scores == want["scores"]
    elif want is None:
        assert set(scores.values()) == {0}
    else:
        top = max(scores.values())
        assert [n for n, s in scores.items() if s == top] == [want["node"]]
        assert top == want["score"]


CACHE = load_vectors("nrt_cache")["cases"]


@pytest.mark.parametrize("case", CACHE, ids=[c["id"] for c in CACHE])
def test_cache(case: dict) -> None:
    given, want = case["input"], case["expected"]
    cache = OverReserve({n["name"]: zones_of(n) for n in given["nrts"]})
    returns = []
    for op, node, spec in given["ops"]:
        key = f"{spec['namespace']}/{spec['name']}"  # upstream's key, empty names included
        if op == "reserve":
            returns.append(cache.reserve(node, key, PodView.of(pod_of(spec)).effective))
        else:
            returns.append(cache.unreserve(node, key))
    if "returns" in want:
        assert returns == want["returns"]
    for node, expected in want.get("zones", {}).items():
        zones = cache.zones(node)
        if expected is None:
            assert zones is None
            continue
        assert zones is not None
        got = {f"node-{z.numa_id}": z.resources for z in zones}
        assert got == {name: amounts(res) for name, res in expected.items()}


NODECONFIG = load_vectors("nrt_nodeconfig")["cases"]


@pytest.mark.parametrize("case", NODECONFIG, ids=[c["id"] for c in NODECONFIG])
def test_nodeconfig(case: dict) -> None:
    given, want = case["input"], case["expected"]
    base = None if given["base"] is None else TopologyManagerConf(**given["base"])
    got = TopologyManagerConf.from_nrt(given["attributes"], given["topology_policies"], base)
    assert got == TopologyManagerConf(**want)


RESOURCES = load_vectors("nrt_resources")["cases"]


@pytest.mark.parametrize("case", RESOURCES, ids=[c["id"] for c in RESOURCES])
def test_resources(case: dict) -> None:
    given, want = case["input"], case["expected"]
    if case["kind"] in ("host_level", "numa_affine"):
        check = is_host_level if case["kind"] == "host_level" else is_numa_affine
        assert check(given["resource"]) is want
        return
    zones = zone_list(given["zones"])
    if case["kind"] == "only_non_numa":
        assert only_non_numa(zones, amounts(given["requests"])) is want
        return
    if case["kind"] == "subtract_container":
        short = take_from_zone(zones, given["numa_id"], given["qos"] == "Guaranteed", amounts(given["requests"]))
        assert (short is not None) is want["error"]
        if want["error"]:
            return
    else:
        subtract_from_zones(amounts(given["requests"]), zones, given["ids"])
    assert [(z.numa_id, z.resources) for z in zones] == [(z.numa_id, z.resources) for z in zone_list(want["zones"])]
