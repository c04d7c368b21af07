"""The migrations are Django's own output (ruff skips them): they must match the models exactly."""

from io import StringIO

from django.core.management import call_command


def test_models_and_migrations_agree(db):
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits non-zero when a migration is missing
        raise AssertionError(f"models changed without a migration:\n{out.getvalue()}") from exc


def test_job_count_backfill_counts_each_sessions_jobs(transactional_db):
    """0007 fills the new column from the jobs table, a session without jobs included (0, not NULL)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    before = [("scheduling", "0006_normalized_results")]
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    cluster = apps.get_model("inventory", "Cluster").objects.create(name="c")
    job = apps.get_model("jobs", "Job")
    session = apps.get_model("scheduling", "SchedulingSession")
    empty = session.objects.create(cluster=cluster)
    two = session.objects.create(cluster=cluster)
    two.jobs.set([job.objects.create(name="a"), job.objects.create(name="b")])

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, job_count FROM scheduling_schedulingsession ORDER BY id")
        assert cursor.fetchall() == [(empty.pk, 0), (two.pk, 2)]
