# Jobs belong to a cluster. Every existing job is given one by the rule documented in README.md
# ("Jobs belong to a cluster") and the migration prints what it did.

import django.db.models.deletion
from django.db import migrations, models


def _labels(report: dict) -> set[str]:
    return {label for key in ("jobs_added", "jobs_updated", "jobs_kept") for label in (report or {}).get(key) or ()}


def assign_clusters(apps, schema_editor):
    """Each job's cluster: (1) the snapshot import that created it (a cluster whose last import lists it),
    (2) else the cluster where its pods hold allocations (the most of them), (3) else the cluster named
    like its namespace, (4) else the only cluster, (5) else the first one created (lowest id). With jobs
    but no cluster at all, a cluster "default" is created for them. Allocations linked to a job of
    another cluster are unlinked (their pod is no longer taken for that job's)."""
    Cluster = apps.get_model("inventory", "Cluster")
    Job = apps.get_model("jobs", "Job")
    Allocation = apps.get_model("inventory", "Allocation")
    if not Job.objects.exists():
        return
    clusters = list(Cluster.objects.order_by("pk"))
    if not clusters:
        clusters = [Cluster.objects.create(name="default", description="created by migration jobs.0004 for the "
                                                                       "jobs that existed before clusters held jobs")]
        print(f"\n  jobs.0004: no cluster existed; created cluster {clusters[0].name!r} for the existing jobs")
    by_name = {c.name: c for c in clusters}
    imported = {label: c for c in clusters if c.source for label in sorted(_labels(c.last_import))}
    held: dict[int, dict[int, int]] = {}
    for job_id, cluster_id in Allocation.objects.exclude(job=None).values_list("job_id", "cluster_id"):
        held.setdefault(job_id, {}).setdefault(cluster_id, 0)
        held[job_id][cluster_id] += 1
    counts = {"import": 0, "allocations": 0, "namespace": 0, "only": 0, "first": 0}
    for job in Job.objects.order_by("pk").iterator():
        label = f"{job.namespace}/{job.name}"
        if job.source_format == "snapshot" and label in imported:
            cluster_id, rule = imported[label].pk, "import"
        elif job.pk in held:
            cluster_id, rule = sorted(held[job.pk].items(), key=lambda kv: (-kv[1], kv[0]))[0][0], "allocations"
        elif job.namespace in by_name:
            cluster_id, rule = by_name[job.namespace].pk, "namespace"
        elif len(clusters) == 1:
            cluster_id, rule = clusters[0].pk, "only"
        else:
            cluster_id, rule = clusters[0].pk, "first"
        Job.objects.filter(pk=job.pk).update(cluster_id=cluster_id)
        counts[rule] += 1
    unlinked = 0
    for job_id, cluster_id in Job.objects.values_list("pk", "cluster_id"):
        unlinked += Allocation.objects.filter(job_id=job_id).exclude(cluster_id=cluster_id).update(job=None)
    words = {"import": "by the snapshot import that created them", "allocations": "where their pods hold allocations",
             "namespace": "by the cluster named like their namespace", "only": "to the only cluster",
             "first": f"to the first cluster ({clusters[0].name})"}
    said = "; ".join(f"{n} {words[rule]}" for rule, n in counts.items() if n)
    print(f"\n  jobs.0004: gave every job a cluster: {said}" +
          (f"; {unlinked} allocation(s) in another cluster than their job's were unlinked from it" if unlinked else ""))
    if schema_editor.connection.vendor == "postgresql":  # check the new keys now: the next step alters the table
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0006_historicalallocation_historicalcluster_and_more'),
        ('jobs', '0003_historicaljob'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='job',
            name='job_unique_name',
        ),
        migrations.AddField(
            model_name='job',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='jobs', to='inventory.cluster'),
        ),
        migrations.AddField(
            model_name='historicaljob',
            name='cluster',
            field=models.ForeignKey(blank=True, db_constraint=False, help_text='the cluster the job runs in: sessions, comparisons and forms of that cluster see it, no other', null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.cluster'),
        ),
        migrations.RunPython(assign_clusters, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='job',
            name='cluster',
            field=models.ForeignKey(help_text='the cluster the job runs in: sessions, comparisons and forms of that cluster see it, no other', on_delete=django.db.models.deletion.CASCADE, related_name='jobs', to='inventory.cluster'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.UniqueConstraint(fields=('cluster', 'namespace', 'name'), name='job_unique_name_in_cluster'),
        ),
    ]
