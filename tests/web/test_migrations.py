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
    # inventory as well: its later migrations add columns (a cluster's disruption budgets) that the state of
    # these targets does not know, so a cluster created in that state must not meet them
    before = [("scheduling", "0006_normalized_results"), ("jobs", "0003_historicaljob"),
              ("inventory", "0009_rejected_pods")]
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


def test_existing_jobs_get_a_cluster_by_the_documented_rule(transactional_db, capsys):
    """jobs.0004: the import that created the job, else where its pods hold allocations, else the cluster
    named like its namespace, else the only cluster, else the first; it prints what it did."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    before = [("jobs", "0003_historicaljob"), ("inventory", "0006_historicalallocation_historicalcluster_and_more")]
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    cluster, node = apps.get_model("inventory", "Cluster"), apps.get_model("inventory", "Node")
    job, allocation = apps.get_model("jobs", "Job"), apps.get_model("inventory", "Allocation")
    first = cluster.objects.create(name="alpha")
    snap = cluster.objects.create(name="snap", source="kubectl-snapshot", last_import={"jobs_added": ["ns/imp"]})
    held = cluster.objects.create(name="held")
    named = cluster.objects.create(name="team")
    jobs = {"imp": job.objects.create(name="imp", namespace="ns", source_format="snapshot"),
            "alloc": job.objects.create(name="alloc", namespace="team"),
            "ns": job.objects.create(name="ns", namespace="team"),
            "other": job.objects.create(name="other", namespace="nowhere")}
    n = node.objects.create(cluster=held, name="n", topology={})
    allocation.objects.create(cluster=held, node=n, job=jobs["alloc"], pod="team/alloc-t-0")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, cluster_id FROM jobs_job ORDER BY id")
        assert cursor.fetchall() == [("imp", snap.pk), ("alloc", held.pk), ("ns", named.pk), ("other", first.pk)]
    said = capsys.readouterr().out
    assert ("jobs.0004: gave every job a cluster: 1 by the snapshot import that created them; 1 where their pods "
            "hold allocations; 1 by the cluster named like their namespace; 1 to the first cluster (alpha)") in said
