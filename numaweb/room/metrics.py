"""The advisor's figures on `/metrics` (docs/METRICS.md), beside the fleet's: per cluster, from its last finished
advisor run, the jobs still pending that a verified plan places after at most N pod moves. Read from the run's stored
answer, so a scrape costs two queries per cluster whatever the queue's length."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from numaweb.inventory.models import Cluster
from numaweb.jobs.services import schedulable_jobs

from .models import DefragRun

#: the `moves` buckets, cumulative like a histogram's `le`: jobs placeable after at most this many moves
MOVE_BUCKETS = ("0", "1", "2", "4", "8", "16", "+Inf")


def placeable(jobs: list[dict], pending: set[int]) -> dict[str, int]:
    """Of an advisor run's ranked jobs, those still `pending` with a verified plan of at most N moves, per bucket."""
    moves = [j["moves"] for j in jobs if j.get("found") and j["job"] in pending]
    return {b: sum(1 for m in moves if b == "+Inf" or m <= int(b)) for b in MOVE_BUCKETS}


class DefragCollector(Collector):
    """numaweb_defrag_placeable_jobs and the time of the run they come from, for every cluster with a finished run."""

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("numaweb_defrag_placeable_jobs",
                                 "Pending jobs that the cluster's last finished advisor run places after at most "
                                 "`moves` pod moves (0: they fit now), each plan verified by a dry run",
                                 labels=["cluster", "moves"])
        when = GaugeMetricFamily("numaweb_defrag_last_run_timestamp_seconds",
                                 "When the cluster's last finished advisor run ended (Unix time)", labels=["cluster"])
        for cluster in Cluster.objects.order_by("name"):
            run = (DefragRun.objects.filter(cluster=cluster, status=DefragRun.DONE).order_by("-finished_at", "-id")
                   .only("result", "finished_at").first())
            if run is None or run.finished_at is None:
                continue
            pending = {j.pk for j in schedulable_jobs(cluster)}
            for bucket, n in placeable((run.result or {}).get("jobs", []), pending).items():
                jobs.add_metric([cluster.name, bucket], n)
            when.add_metric([cluster.name], run.finished_at.timestamp())
        yield from (jobs, when)
