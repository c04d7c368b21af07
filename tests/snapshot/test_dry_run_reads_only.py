"""A dry-run import takes no write lock (issue 37 row 12): it ran in the import's transaction, which on SQLite
begins IMMEDIATE (the database's write lock) and on PostgreSQL holds the cluster's nodes, so another writer waited
11.8 s for a preview. Now it reads only, outside any transaction, and reports exactly what the import then does."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from numaweb.inventory import snapshot
from numaweb.inventory.models import Cluster
from tests.snapshot.test_import_safety import UPSTREAM, state
from tests.web.helpers import make_node

WRITES = ("INSERT", "UPDATE", "DELETE", "BEGIN", "SAVEPOINT", "CREATE", "REPLACE")


def _comparable(report: dict) -> dict:
    """What the import does, without what only says how long it took (the rejected pods' `seconds`)."""
    out = {k: v for k, v in report.items() if k not in ("dry_run",)}
    if out.get("rejected_pods"):
        out["rejected_pods"] = {k: v for k, v in out["rejected_pods"].items() if k != "seconds"}
    return out


@pytest.mark.django_db(transaction=True)  # no test transaction around it: the import's own are what is looked at
@pytest.mark.parametrize("prune", [False, True])
def test_a_dry_run_reads_only_and_reports_what_the_import_does(monkeypatch, prune):
    cluster = Cluster.objects.create(name="prod")
    make_node(cluster, "node1")  # listed by the snapshot: updated
    make_node(cluster, "not-in-the-snapshot")  # pruned or reported missing
    data = UPSTREAM.read_bytes()
    inside: list[tuple[bool, bool]] = []
    original = snapshot._import_node

    def spy(run, name, snode):
        inside.append((connection.in_atomic_block, connection.connection.in_transaction))
        return original(run, name, snode)

    monkeypatch.setattr(snapshot, "_import_node", spy)
    before = state()
    with CaptureQueriesContext(connection) as queries:
        preview = snapshot.import_snapshot(cluster, data, prune=prune, dry_run=True)
    assert inside and set(inside) == {(False, False)}  # no transaction open while it works: no lock held
    writes = [q["sql"] for q in queries if q["sql"].lstrip().split()[0].upper() in WRITES or "FOR UPDATE" in q["sql"]]
    assert writes == []
    assert state() == before
    done = snapshot.import_snapshot(cluster, data, prune=prune)
    assert preview["dry_run"] and not done["dry_run"]
    assert _comparable(preview) == _comparable(done)
    assert preview["nodes_added"] and preview["nodes_updated"] == {"node1": preview["nodes_updated"]["node1"]}
    assert (preview["nodes_removed"] if prune else preview["nodes_missing"]) == ["not-in-the-snapshot"]


@pytest.mark.django_db(transaction=True)
def test_a_dry_run_into_a_new_cluster_creates_nothing(client):
    report = snapshot.import_snapshot(Cluster(name="new"), UPSTREAM.read_bytes(), dry_run=True)
    assert report["nodes_added"] and report["jobs_added"] and not Cluster.objects.exists()
