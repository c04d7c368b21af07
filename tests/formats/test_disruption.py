"""PodDisruptionBudgets in a snapshot: the pods a selector covers (matchLabels, matchExpressions, `{}` all of the
namespace, none without one), and the disruptions allowed: the status's figure when there is one, else the
disruption controller's rule (healthy − desired, never below 0; percentages rounded up)."""

from __future__ import annotations

import json

import pytest

from scheduler_core.errors import FormatError
from scheduler_core.formats.snapshot import load_snapshot


def pod(name: str, labels: dict, phase: str = "Running", namespace: str = "ml") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"nodeName": "n1" if phase == "Running" else "",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": phase}}


def pdb(name: str, spec: dict, status: dict | None = None, namespace: str = "ml") -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status or {}}


PODS = [pod(f"w-{i}", {"app": "train", "tier": "gpu" if i < 3 else "cpu"}) for i in range(7)] + [
    pod("w-pending", {"app": "train"}, phase="Pending"), pod("db", {"app": "db"}),
    pod("other", {"app": "train"}, namespace="default")]


def budgets(*objects: dict) -> dict[str, tuple[int, set[str]]]:
    snap = load_snapshot(json.dumps({"kind": "List", "items": [*PODS, *objects]}))
    return {b.name: (b.allowed, set(b.pods)) for b in snap.budgets}


def test_a_selector_covers_the_running_pods_of_its_namespace():
    train = {f"ml/w-{i}" for i in range(7)}
    got = budgets(pdb("train", {"minAvailable": 5, "selector": {"matchLabels": {"app": "train"}}}),
                  pdb("gpu", {"maxUnavailable": 1, "selector": {"matchExpressions": [
                      {"key": "tier", "operator": "In", "values": ["gpu"]}]}}),
                  pdb("not-db", {"maxUnavailable": 0, "selector": {"matchExpressions": [
                      {"key": "app", "operator": "NotIn", "values": ["train"]}]}}),
                  pdb("everything", {"minAvailable": 0, "selector": {}}),
                  pdb("nothing", {"minAvailable": 0}))
    # the pending pod holds nothing and is left out; "other" is in another namespace
    assert got["ml/train"] == (7 - 5, train)
    assert got["ml/gpu"] == (1, {"ml/w-0", "ml/w-1", "ml/w-2"})
    assert got["ml/not-db"] == (0, {"ml/db"})
    assert got["ml/everything"] == (8, train | {"ml/db"})
    assert got["ml/nothing"] == (0, set())


def test_percentages_round_up_and_the_status_figure_wins():
    # kubernetes.io "Specifying a Disruption Budget for your Application", rounding: with 7 pods and minAvailable
    # "50%", 4 must stay available (3.5 rounded up), so 3 may be disrupted
    seven = {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}  # w-0 … w-6, all running
    got = budgets(pdb("half", {"minAvailable": "50%", "selector": seven}),
                  pdb("tenth", {"maxUnavailable": "10%", "selector": seven}),  # 0.7 rounded up: 1
                  pdb("strict", {"minAvailable": "100%", "selector": seven}),
                  pdb("told", {"minAvailable": 1, "selector": seven}, {"disruptionsAllowed": 0}),
                  # app=train also matches the pending pod: 8 expected, 1 may be unavailable, and 1 already is
                  pdb("pending", {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "train"}}}))
    assert {name: got[f"ml/{name}"][0] for name in ("half", "tenth", "strict", "told", "pending")} == {
        "half": 3, "tenth": 1, "strict": 0, "told": 0, "pending": 0}


@pytest.mark.parametrize(("spec", "status", "message"), [
    ({"minAvailable": "half", "selector": {}}, {}, "spec.minAvailable: an integer or a percentage"),
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, {}, "unknown operator 'Near'"),
    ({"selector": []}, {}, "spec.selector must be an object"),
    ({"selector": {}}, {"disruptionsAllowed": "1"}, "status.disruptionsAllowed must be an integer"),
])
def test_bad_budgets_are_refused_naming_the_field(spec, status, message):
    with pytest.raises(FormatError, match=message):
        budgets(pdb("bad", spec, status))
