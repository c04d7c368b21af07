"""`manage.py run_session [--cluster C] [--profile P] [--dry-run] [--job NAME]... [--queue]`.

Runs a scheduling session in this process (or, with --queue, hands it to the workers) and prints
its outcome; exits non-zero when the session fails."""

from django.core.management.base import BaseCommand, CommandError

from numaweb.commands import require_migrated_database
from numaweb.inventory.models import Cluster
from numaweb.jobs import bounds
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession


class Command(BaseCommand):
    help = "Run a scheduling session over a cluster's pending jobs (or the named ones)."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default=None, help="cluster name (default: the only/first cluster)")
        parser.add_argument("--profile", default="volcano", choices=SchedulingSession.PROFILES)
        parser.add_argument("--dry-run", action="store_true", help="place without allocating")
        parser.add_argument("--job", action="append", default=[], help="job name (repeatable); default: pending")
        parser.add_argument("--queue", action="store_true", help="queue it for a worker instead of running here")
        parser.add_argument("--session", type=int, default=None, help="run this existing (failed/pending) session")

    def handle(self, *args, cluster, profile, dry_run, job, queue, session, **options):
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
            except (services.BrokerUnavailable, job_services.NotSchedulable, bounds.OutOfBounds) as exc:
                raise CommandError(str(exc)) from exc
            row = services.create_session(target, profile, dry_run, jobs)
        row = services.execute_session(row.pk)
        self.stdout.write(f"session {row.pk}: {row.status}; {row.pods_placed}/{row.pods_total} pods placed, "
                          f"{row.jobs_placed}/{row.jobs_total} jobs, {row.nodes_total} nodes, "
                          f"engine {row.engine_ms or 0:.1f} ms")
        for p in row.placements.order_by("index")[:50]:
            where = f"{p.node_name} cpus {p.cpus or '-'}" if p.node_name else f"unplaced: {p.reason}"
            self.stdout.write(f"  {p.pod}: {where}")
        if row.status != SchedulingSession.DONE:
            raise CommandError(f"session {row.pk} failed: {row.error}")
