"""`manage.py run_session [--cluster C] [--profile P] [--dry-run] [--job NAME]... [--queue] [--all | --json]`.

Runs a scheduling session in this process (or, with --queue, hands it to the workers) and prints a summary:
the counts, where the pods went (the busiest nodes) and why the others were not placed, grouped by reason;
`--all` adds every pod, `--json` prints the session and every placement as one JSON document instead. A
progress bar shows on a terminal. Exits non-zero when the session fails."""

from collections import Counter
from json import dumps
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from numaweb.commands import plural, require_migrated_database
from numaweb.inventory.models import Cluster
from numaweb.jobs import bounds
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.progress import bar
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.runs import BrokerUnavailable

SHOWN = 5  # nodes and reasons in the summary


def summary_lines(row: SchedulingSession) -> list[str]:
    """The session's counts, the nodes that took the most pods and the reasons pods were left unplaced."""
    lines = [f"session {row.pk}: {row.status}; {row.pods_placed}/{row.pods_total} pods placed, "
             f"{row.jobs_placed}/{row.jobs_total} jobs, {plural(row.nodes_total or 0, 'node')}, "
             f"engine {row.engine_ms or 0:.1f} ms"]
    placements = row.placements.only("node_name", "message", "kubelet_reason")
    nodes = Counter(p.node_name for p in placements if p.node_name)
    reasons = Counter(p.reason for p in placements if not p.node_name)
    if nodes:
        busiest = ", ".join(f"{name} {plural(n, 'pod')}" for name, n in nodes.most_common(SHOWN))
        more = f" and {plural(len(nodes) - SHOWN, 'more node')}" if len(nodes) > SHOWN else ""
        lines.append(f"  placed on {plural(len(nodes), 'node')}: {busiest}{more}")
    if reasons:
        lines.append(f"  not placed: {plural(sum(reasons.values()), 'pod')}")
        lines += [f"    {n} × {reason or 'no reason given'}" for reason, n in reasons.most_common(SHOWN)]
        if len(reasons) > SHOWN:
            lines.append(f"    and {plural(len(reasons) - SHOWN, 'other reason')}")
    return lines


def session_json(row: SchedulingSession) -> dict:
    return {"session": {"id": row.pk, "status": row.status, "profile": row.profile, "dry_run": row.dry_run,
                        "cluster": row.cluster.name, "pods_placed": row.pods_placed, "pods_total": row.pods_total,
                        "jobs_placed": row.jobs_placed, "jobs_total": row.jobs_total, "nodes": row.nodes_total,
                        "engine_ms": row.engine_ms, "error": row.error},
            "placements": [{"pod": p.pod, "namespace": p.namespace, "job": p.job, "task": p.task,
                            "node": p.node_name or None, "cpus": p.cpus or None, "status": p.status,
                            "reason": p.reason or None} for p in row.placements.order_by("index")]}


class Command(BaseCommand):
    help = "Run a scheduling session over a cluster's pending jobs (or the named ones)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", default=None, help="cluster name (default: the only/first cluster)")
        parser.add_argument("--profile", default="volcano", choices=SchedulingSession.PROFILES)
        parser.add_argument("--dry-run", action="store_true", help="place without allocating")
        parser.add_argument("--job", action="append", default=[], help="job name (repeatable); default: pending")
        parser.add_argument("--queue", action="store_true", help="queue it for a worker instead of running here")
        parser.add_argument("--session", type=int, default=None, help="run this existing (failed/pending) session")
        shown = parser.add_mutually_exclusive_group()
        shown.add_argument("--all", dest="every_pod", action="store_true",
                           help="after the summary, every pod and where it went")
        shown.add_argument("--json", dest="as_json", action="store_true",
                           help="the session and every placement as JSON")

    def handle(self, *args: Any, cluster: str | None, profile: str, dry_run: bool, job: list[str], queue: bool,
               session: int | None, every_pod: bool, as_json: bool, **options: Any) -> None:
        require_migrated_database()
        if session is not None:
            row = SchedulingSession.objects.filter(pk=session).first()
            if row is None:
                raise CommandError(f"no session {session}")
            if row.status == SchedulingSession.FAILED:
                SchedulingSession.objects.filter(pk=row.pk).update(status=SchedulingSession.PENDING, error="")
        else:
            target = Cluster.objects.filter(name=cluster).first() if cluster else Cluster.objects.first()
            if target is None:
                raise CommandError(f"no cluster {cluster!r}" if cluster else "no cluster: run `manage.py demo` first")
            jobs = None
            if job:
                jobs = list(Job.objects.filter(cluster=target, name__in=job))
                missing = sorted(set(job) - {j.name for j in jobs})
                if missing:
                    raise CommandError(f"unknown job {missing[0]!r} in cluster {target.name}")
            if jobs is None:
                jobs = job_services.schedulable_jobs(target)
            try:
                job_services.check_schedulable(jobs, target)
                if queue:
                    row = services.start_session(target, profile, dry_run, jobs)
                    self.stdout.write(f"session {row.pk} queued")
                    return
            except (BrokerUnavailable, job_services.NotSchedulable, bounds.OutOfBounds) as exc:
                raise CommandError(str(exc)) from exc
            row = services.create_session(target, profile, dry_run, jobs)
        with bar(0, f"session {row.pk}", unit="pod") as progress:
            def show(done: int, total: int) -> None:
                progress.total = total
                progress.update(done - progress.n)

            row = services.execute_session(row.pk, show)
        if as_json:
            self.stdout.write(dumps(session_json(row), indent=1))
        else:
            for line in summary_lines(row):
                self.stdout.write(line)
            if every_pod:
                for p in row.placements.order_by("index"):
                    where = f"{p.node_name} cpus {p.cpus or '-'}" if p.node_name else f"not placed: {p.reason}"
                    self.stdout.write(f"  {p.pod}: {where}")
            elif row.pods_total:
                self.stdout.write("(--all lists every pod, --json prints everything as JSON)")
        if row.status != SchedulingSession.DONE:
            raise CommandError(f"session {row.pk} failed: {row.error}")
