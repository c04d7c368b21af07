"""`manage.py import_cluster FILE [--cluster NAME] [--dry-run] [--prune] [--allow-empty]`: create or update a
cluster from the output of
`kubectl get nodes,noderesourcetopologies,numatopologies,pods,jobs.batch.volcano.sh,podgroups -A -o yaml`
(or -o json). Prints what changed (with --dry-run: what would change, changing nothing) and every
disagreement; exit 1 with the reason on bad input or a snapshot without nodes."""

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from numaweb.commands import engine_message, require_migrated_database
from numaweb.inventory import snapshot
from numaweb.inventory.models import Cluster
from scheduler_core.errors import EngineError
from scheduler_core.formats.snapshot import MAX_SNAPSHOT_BYTES


def report_lines(report: dict) -> list[str]:
    """The import report as lines a person reads (the API returns the dict itself)."""
    lines = ["dry run: nothing was changed; an import would do this:"] if report.get("dry_run") else []
    lines.append(f"nodes: {len(report['nodes_added'])} added, {len(report['nodes_updated'])} updated, "
                 f"{report['nodes_unchanged']} unchanged, {len(report['nodes_removed'])} removed, "
                 f"{len(report.get('nodes_missing', ()))} missing; {report['allocations_replayed']} allocations "
                 f"replayed, {report.get('allocations_dropped', 0)} dropped; jobs: {len(report['jobs_added'])} added, "
                 f"{len(report['jobs_updated'])} updated")
    rejected = report.get("rejected_pods")
    if rejected and (rejected["kept"] or rejected["removed"]):
        lines.append(f"rejected by the kubelet: {rejected['kept']} pods ({len(rejected['added'])} added, "
                     f"{len(rejected['updated'])} updated, {len(rejected['removed'])} removed), "
                     f"{rejected['reproduced']} reproduced by the replay; explained in {rejected['seconds']} s")
    dra = report.get("dra")
    if dra and (dra["devices"] or dra["claims"]):
        lines.append(f"DRA: {dra['devices']} devices, {dra['claims']} claims, {dra['pods']} pods using devices, "
                     f"{len(dra['misaligned'])} misaligned with their pinned CPUs or memory")
        lines.extend(f"  misaligned: {pod}" for pod in dra["misaligned"])
    for name, what in sorted(report["nodes_updated"].items()):
        lines.append(f"  updated {name}: {', '.join(what)}")
    for key, label in (("nodes_removed", "removed (flagged)"),
                       ("nodes_missing", "not in the snapshot, kept (--prune to flag it removed)"),
                       ("nodes_returned", "returned"),
                       ("jobs_kept", "job kept (already scheduled)"), ("scheduled_dropped", "scheduled allocation "
                                                                                             "dropped")):
        for item in report.get(key, ()):
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

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="kubectl get ... -A -o yaml (or -o json) output")
        parser.add_argument("--cluster", default="default", help="cluster to create or update")
        parser.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
        parser.add_argument("--prune", action="store_true",
                            help="flag the cluster's nodes the snapshot no longer lists as removed (without it they "
                                 "are only reported)")
        parser.add_argument("--allow-empty", action="store_true",
                            help="import a snapshot that lists no node (refused otherwise)")

    def handle(self, *args: Any, file: str, cluster: str, dry_run: bool = False, prune: bool = False,
               allow_empty: bool = False, **options: Any) -> None:
        require_migrated_database()
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{file}: no such file")
        if path.stat().st_size > MAX_SNAPSHOT_BYTES:
            raise CommandError(f"{file}: larger than the {MAX_SNAPSHOT_BYTES >> 20} MiB limit")
        start = time.perf_counter()
        flags = {"prune": prune, "allow_empty": allow_empty, "dry_run": dry_run, "progress": True}
        try:
            if dry_run:  # reads only, no lock; a new cluster is not created
                target = Cluster.objects.filter(name=cluster).first() or Cluster(name=cluster)
                report = snapshot.import_snapshot(target, path.read_bytes(), **flags)
            else:
                with transaction.atomic():  # a new cluster is only kept if its import succeeds
                    target, _ = Cluster.objects.get_or_create(name=cluster)
                    report = snapshot.import_snapshot(target, path.read_bytes(), **flags)
        except (EngineError, snapshot.EmptySnapshot) as exc:
            raise CommandError(f"{file}: {engine_message(exc)}") from exc
        for line in report_lines(report):
            self.stdout.write(line)
        verb = "previewed (dry run)" if dry_run else "imported"
        self.stdout.write(f"cluster {target.name}: {verb} in {time.perf_counter() - start:.2f} s")
