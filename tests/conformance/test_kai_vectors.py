"""KAI-Scheduler numa plugin vectors (tests/conformance/data/kai_numa.json; ENGINE.md §4.2, `kai`).

Each case is one assertion (or one table row) of upstream's unit tests, run against `scheduler_core.kai`:
the evaluators, the gates, the request decomposition, the score and the in-cycle ledger.
"""

from __future__ import annotations

import pytest

from scheduler_core.kai.evaluator import Placement, project, solve
from scheduler_core.kai.plugin import KaiPlugin
from scheduler_core.kai.requests import PodRequests
from scheduler_core.kai.zones import Amounts, ZoneTopology
from scheduler_core.model.pods import INIT, SIDECAR, Container, Pod
from scheduler_core.model.quantity import count, cpu_milli
from tests.conftest import load_vectors

CASES = load_vectors("kai_numa")["cases"]


def amount(resource: str, value: str) -> int:
    return cpu_milli(value) if resource == "cpu" else count(value)


def zones_of(t: dict | None) -> tuple[ZoneTopology | None, Amounts]:
    if t is None:
        return None, ()
    resources = tuple(sorted({r for zone in t["zones"] for key in ("allocatable", "available") for r in zone[key]}))

    def table(key: str) -> Amounts:
        return tuple(tuple(amount(r, zone[key][r]) if r in zone[key] else 0 for r in resources) for zone in t["zones"])

    numa_ids = tuple(int(zone["id"].rsplit("-", 1)[1]) for zone in t["zones"])
    return ZoneTopology(t["policy"], t["scope"], numa_ids, resources, table("allocatable")), table("available")


def pod_of(p: dict) -> Pod:
    def container(name: str, requests: dict, kind: str = "app") -> Container:
        return Container(name, {r: amount(r, v) for r, v in requests.items()}, kind=kind)

    inits = tuple(container(f"init{i}", c["requests"], SIDECAR if c["restartable"] else INIT)
                  for i, c in enumerate(p.get("init", ())))
    apps = tuple(container(f"c{i}", c) for i, c in enumerate(p["containers"]))
    return Pod("p", apps, inits, qos=p["qos"])


def plugin_of(nodes: dict[str, dict | None], ignore: frozenset[str] = frozenset()) -> KaiPlugin:
    return KaiPlugin({name: zones_of(t) for name, t in nodes.items()}, ignore)


def placement_amounts(topo: ZoneTopology, placement: Placement) -> dict[str, dict[str, int]]:
    return {str(z): {r: v for r, v in zip(topo.resources, row, strict=True) if v} for z, row in placement.items()}


def want_amounts(want: dict[str, dict[str, str]]) -> dict[str, dict[str, int]]:
    return {z: {r: amount(r, v) for r, v in res.items()} for z, res in want.items()}


def by_kind(kind: str) -> list:
    return [pytest.param(c, id=c["id"]) for c in CASES if c["kind"] == kind]


def test_every_case_has_its_source():
    kinds = {"solve", "evaluate", "allocatable", "should_filter", "requests", "score", "wants_numa", "reservation",
             "allocate"}
    for case in CASES:
        assert case["kind"] in kinds, case["id"]
        src = case["source"]
        assert src["repo"] == "kai-scheduler/KAI-Scheduler" and len(src["commit"]) == 40, case["id"]
        assert src["file"].endswith("_test.go") and src["test"].startswith("Test") and src["case"], case["id"]
    assert len({c["id"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", by_kind("solve"))
def test_solve(case):
    topo, available = zones_of(case["topology"])
    assert topo is not None
    aligned = frozenset(topo.resources) - frozenset(case.get("ignore", ()))
    units = [{r: amount(r, v) for r, v in u.items()} for u in case["requests"]]
    placement = solve(topo, available, [project(u, topo.resources, aligned) for u in units], [])
    exp = case["expected"]
    assert (placement is not None) == exp["admit"]
    if placement is None:
        return
    got = placement_amounts(topo, placement)
    if "zones" in exp:
        assert sorted(placement) == exp["zones"]
    if "span" in exp:
        assert len(placement) == exp["span"]
    for z, res in want_amounts(exp.get("amounts", {})).items():
        for r, v in res.items():
            assert got[z][r] == v
    for r, v in exp.get("total", {}).items():
        assert sum(row.get(r, 0) for row in got.values()) == amount(r, v)


@pytest.mark.parametrize("case", by_kind("evaluate") + by_kind("allocatable"))
def test_evaluate(case):
    plugin = plugin_of({"node-a": case["topology"]})
    e = plugin.evaluate(PodRequests.of(pod_of(case["pod"])), "node-a")
    exp = case["expected"]
    assert e.aligned == exp["admit"]
    if e.aligned and "placement" in exp:
        topo = plugin.topo["node-a"]
        assert topo is not None
        assert placement_amounts(topo, e.placement) == want_amounts(exp["placement"])


@pytest.mark.parametrize("case", by_kind("should_filter"))
def test_should_filter(case):
    plugin = plugin_of({"node-a": case["topology"]})
    assert plugin.should_filter(PodRequests.of(pod_of(case["pod"])), "node-a") == case["expected"]["filter"]


@pytest.mark.parametrize("case", by_kind("requests"))
def test_requests(case):
    req = PodRequests.of(pod_of(case["pod"]))
    concurrent, serial = req.for_scope(case["scope"])
    exp = case["expected"]

    def units(want: list[dict[str, str]]) -> list[dict[str, int]]:
        return [{r: amount(r, v) for r, v in u.items()} for u in want]

    if "concurrent" in exp:
        assert [dict(u) for u in concurrent] == units(exp["concurrent"])
        assert [dict(u) for u in serial] == units(exp["serial"])
    for key, got in (("concurrent", concurrent), ("serial", serial), ("pod_scope", req.pod_scope)):
        for r in ("cpu", "memory"):
            want = exp.get(f"{key}_{r}")
            if want is not None:
                assert [u.get(r, 0) for u in got] == [amount(r, v) for v in want]


@pytest.mark.parametrize("case", by_kind("score"))
def test_score(case):
    plugin = plugin_of(case["nodes"])
    req = PodRequests.of(pod_of(case["pod"]))
    values = plugin.scores(req, [plugin.evaluate(req, case["node"]).span])
    assert (0.0 if values is None else values[0]) == case["expected"]["score"]


@pytest.mark.parametrize("case", by_kind("wants_numa"))
def test_wants_numa(case):
    plugin = plugin_of(case["nodes"])
    assert plugin.wants_numa(PodRequests.of(pod_of(case["pod"]))) == case["expected"]["wants"]


@pytest.mark.parametrize("case", by_kind("reservation"))
def test_reservation(case):
    plugin = plugin_of({"node-a": case["topology"]})
    topo = plugin.topo["node-a"]
    assert topo is not None
    cpu = topo.resources.index("cpu")
    for step in case["steps"]:
        exp = step["expected"]
        if step["op"] == "place":
            e = plugin.evaluate(PodRequests.of(pod_of(step["pod"])), "node-a")
            plugin.allocate(step["uid"], "node-a", e.placement)
            assert sorted(e.placement) == exp["zones"]
        elif step["op"] == "charge":
            placement = {int(z): [amount(r, res[r]) if r in res else 0 for r in topo.resources]
                         for z, res in step["placement"].items()}
            plugin.allocate(step["uid"], "node-a", placement)
        elif step["op"] == "rollback":
            plugin.deallocate(step["uid"], "node-a")
        else:
            assert plugin.evaluate(PodRequests.of(pod_of(step["pod"])), "node-a").aligned == exp["admit"]
        if "available_cpu" in exp:
            assert [zone[cpu] for zone in plugin.available["node-a"]] == [cpu_milli(v) for v in exp["available_cpu"]]


@pytest.mark.parametrize("case", by_kind("allocate"))
def test_allocate(case):
    plugin = plugin_of(case["nodes"])
    for p, want in zip(case["pods"], case["expected"]["pods"], strict=True):
        req = PodRequests.of(pod_of(p))
        names = sorted(case["nodes"])
        evaluations = {n: plugin.evaluate(req, n) for n in names}
        fit = [n for n in names if evaluations[n].aligned]
        scores = plugin.scores(req, [evaluations[n].span for n in fit]) or [0.0] * len(fit)
        best = max(zip(scores, fit, strict=True), key=lambda sn: sn[0], default=None)  # ties: the first name
        if best is None:
            assert want["node"] is None
            continue
        name = best[1]
        assert name == want["node"]
        assert sorted(evaluations[name].placement) == want["zones"]
        plugin.allocate(f"pod-{id(p)}", name, evaluations[name].placement)
    for name, cpus in case["expected"]["available_cpu"].items():
        topo = plugin.topo[name]
        assert topo is not None
        col = topo.resources.index("cpu")
        assert [zone[col] for zone in plugin.available[name]] == [cpu_milli(v) for v in cpus]
