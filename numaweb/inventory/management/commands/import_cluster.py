"""`manage.py import_cluster FILE [--cluster NAME]`: create or update a cluster from the output of
`kubectl get nodes,noderesourcetopologies,numatopologies,pods,jobs.batch.volcano.sh,podgroups -A -o yaml`
(or -o json). Prints what changed and every disagreement; exit 1 with the reason on bad input."""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from numaweb.commands import engine_message, require_migrated_database
from numaweb.inventory import snapshot
from numaweb.inventory.models import Cluster
from scheduler_core.errors import EngineError
from scheduler_core.formats.snapshot import MAX_SNAPSHOT_BYTES


def report_lines(report: dict) -> list[str]:
    """The import report as lines a person reads (the API returns the dict itself)."""
    lines = [f"nodes: {len(report['nodes_added'])} added, {len(report['nodes_updated'])} updated, "
             f"{report['nodes_unchanged']} unchanged, {len(report['nodes_removed'])} removed; "
             f"{report['allocations_replayed']} allocations replayed; jobs: {len(report['jobs_added'])} added, "
             f"{len(report['jobs_updated'])} updated"]
    for name, what in sorted(report["nodes_updated"].items()):
        lines.append(f"  updated {name}: {', '.join(what)}")
    for key, label in (("nodes_removed", "removed (flagged)"), ("nodes_returned", "returned"),
                       ("jobs_kept", "job kept (already scheduled)"), ("scheduled_dropped", "scheduled allocation "
                                                                                             "dropped")):
        for item in report[key]:
            lines.append(f"  {label}: {item}")
    for item in report["disagreements"]:
        lines.append(f"  disagreement: {item}")
    for note in report["notes"]:
        lines.append(f"  note: {note}")
    if not report["changed"]:
        lines.append("nothing changed")
    return lines


class Command(BaseCommand):
    help = "Import a kubectl cluster snapshot (nodes, NRT, Numatopology, pods, Volcano Jobs, PodGroups)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="kubectl get ... -A -o yaml (or -o json) output")
        parser.add_argument("--cluster", default="default", help="cluster to create or update")

    def handle(self, *args, file, cluster, **options):
        require_migrated_database()
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{file}: no such file")
        if path.stat().st_size > MAX_SNAPSHOT_BYTES:
            raise CommandError(f"{file}: larger than the {MAX_SNAPSHOT_BYTES >> 20} MiB limit")
        start = time.perf_counter()
        try:
            with transaction.atomic():  # a new cluster is only kept if its import succeeds
                target, _ = Cluster.objects.get_or_create(name=cluster)
                report = snapshot.import_snapshot(target, path.read_bytes(), progress=True)
        except EngineError as exc:
            raise CommandError(f"{file}: {engine_message(exc)}") from exc
        for line in report_lines(report):
            self.stdout.write(line)
        self.stdout.write(f"cluster {target.name}: imported in {time.perf_counter() - start:.2f} s")
