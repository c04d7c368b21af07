"""The fleet summaries a process built are kept in the shared cache, so a new web process's first scrape reads them
instead of building every node's engine node again; a node changed since is built again, alone."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from numaweb.inventory import services
from numaweb.inventory.models import Node
from numaweb.scheduling import fleet
from tests.web.room_rows import fragmented_rows

TOKEN = "shared-cache-token"


def free_cpus(client) -> float:
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    return sum(s.value for f in text_string_to_metric_families(text) if f.name == "numaweb_fleet_cpus_free"
               for s in f.samples)


def test_a_new_process_reads_the_summaries_and_builds_only_changed_nodes(db, settings, anon_client, monkeypatch):
    settings.NUMAWEB_METRICS_TOKEN = TOKEN
    fragmented_rows(nodes=3)
    assert free_cpus(anon_client) == 3 * 28
    fleet._CACHE.clear()  # a new process: nothing built here yet
    built: list[int] = []
    engine_nodes = fleet.inventory.engine_nodes

    def counting(rows, *fields):
        out = list(engine_nodes(rows, *fields))
        built.extend(pk for (pk, *_rest), _node in out)
        return out

    monkeypatch.setattr(fleet.inventory, "engine_nodes", counting)
    assert free_cpus(anon_client) == 3 * 28 and built == []  # all three from the shared cache
    node = Node.objects.order_by("name").first()
    services.add_allocation(node, pod="batch/new", container="c", cpus="0")
    fleet._CACHE.clear()
    assert free_cpus(anon_client) == 3 * 28 - 1 and built == [node.pk]  # the changed node alone
