"""numaweb_defrag_placeable_jobs on /metrics: from the cluster's last finished advisor run, the jobs still pending
that a verified plan places after at most N moves (cumulative buckets); a job no longer pending stops counting."""

from __future__ import annotations

from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from numaweb.jobs.models import Job
from numaweb.room import defrag
from numaweb.room.models import DefragRun
from tests.web.helpers import make_job
from tests.web.room_rows import fragmented_rows, gang_job

TOKEN = "defrag-scrape-token"


def scrape(client) -> dict[tuple[str, str], float]:
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    return {(s.labels["cluster"], s.labels["moves"]): s.value for family in text_string_to_metric_families(text)
            if family.name == "numaweb_defrag_placeable_jobs" for s in family.samples}


def test_jobs_placeable_after_at_most_n_moves(db, settings, anon_client):
    settings.NUMAWEB_METRICS_TOKEN = TOKEN
    cluster = fragmented_rows(nodes=2)
    a = gang_job("train-a", pods=1)
    gang_job("train-b", pods=1)
    make_job("small", cpus="4", policy="single-numa-node")  # fits now: 0 moves
    make_job("too-big", cpus="40", policy="single-numa-node")  # no plan: in no bucket
    assert scrape(anon_client) == {}  # no finished run yet: no series
    row = DefragRun.objects.create(**defrag.parse_request(cluster, {}))
    defrag.ADVISOR.execute(row.pk)
    figures = scrape(anon_client)
    assert {m: figures[("frag", m)] for m in ("0", "1", "2", "16", "+Inf")} == {
        "0": 1, "1": 3, "2": 3, "16": 3, "+Inf": 3}
    Job.objects.filter(pk=a.pk).update(finished_at=timezone.now())  # no longer pending
    assert scrape(anon_client)[("frag", "1")] == 2
