"""PodDisruptionBudgets from a snapshot import, kept on the cluster and turned into make room's rules (the API's
side: tests/api/test_defrag.py)."""

from __future__ import annotations

import pathlib

import yaml
from django.core.management import call_command

from numaweb.inventory.models import Cluster
from numaweb.room.services import rules_of
from scheduler_core.scheduler.room_moves import RunningPod

UPSTREAM = pathlib.Path(__file__).resolve().parents[1] / "formats" / "data" / "snapshot" / "upstream-examples.yaml"


def test_the_import_keeps_the_budgets_and_make_room_honours_them(db, tmp_path):
    snapshot = yaml.safe_load(UPSTREAM.read_text())
    for item in snapshot["items"]:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("train-worker-"):
            item["metadata"]["labels"] = {"app": "train"}
    snapshot["items"] += [
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "train", "namespace": "ml"},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "all", "namespace": "default"},
         "spec": {"maxUnavailable": 1, "selector": {}}, "status": {"disruptionsAllowed": 0}},
    ]
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump(snapshot))
    call_command("import_cluster", str(path), "--cluster", "prod")
    cluster = Cluster.objects.get(name="prod")
    assert cluster.disruption_budgets == [
        {"name": "ml/train", "allowed": 1, "pods": ["ml/train-worker-0", "ml/train-worker-1"]},
        {"name": "default/all", "allowed": 0, "pods": ["default/cache", "default/web-7d9f"]},
    ]
    rules = rules_of({}, cluster)
    assert rules.refusal(RunningPod("default/cache", "node1", ()), ()) == \
        "PodDisruptionBudget default/all allows no disruption"
    assert rules.refusal(RunningPod("ml/train-worker-0", "node1", ()), ()) is None
    workers = [RunningPod(f"ml/train-worker-{i}", "node1", ()) for i in range(2)]
    assert rules.over_budget(workers[:1]) is None
    assert rules.over_budget(workers) == "2 pods of PodDisruptionBudget ml/train disrupted, which allows 1"

