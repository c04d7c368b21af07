"""Allocations name their cluster (one allocation per pod container in a cluster, enforced by a
constraint) and their job. Existing rows: the cluster is copied from the node, the job found from the
pod's name (`<namespace>/<job>-<task>-<index>`); where the old code gave one pod container several
allocations, the earliest is kept and the later ones (the double bookings) are deleted; job statuses
are then derived from what their pods hold."""

import django.db.models.deletion
from django.db import migrations, models


def link(apps, schema_editor):
    Allocation = apps.get_model("inventory", "Allocation")
    Node = apps.get_model("inventory", "Node")
    Job = apps.get_model("jobs", "Job")
    Task = apps.get_model("jobs", "Task")
    cluster_of = dict(Node.objects.values_list("id", "cluster_id"))
    replicas = {(job_id, name): n for job_id, name, n in Task.objects.values_list("job_id", "name", "replicas")}
    jobs = {(ns, name): pk for pk, ns, name in Job.objects.values_list("id", "namespace", "name")}

    def job_of(uid: str):
        namespace, _, name = uid.partition("/")
        parts = name.split("-")
        if len(parts) < 3 or not parts[-1].isdigit():
            return None
        for k in range(1, len(parts) - 1):
            pk = jobs.get((namespace, "-".join(parts[:k])))
            if pk is not None and int(parts[-1]) < replicas.get((pk, "-".join(parts[k:-1])), 0):
                return pk
        return None

    seen = set()
    for a in Allocation.objects.order_by("id"):
        cluster = cluster_of[a.node_id]
        if (cluster, a.pod, a.container) in seen:
            a.delete()
            continue
        seen.add((cluster, a.pod, a.container))
        Allocation.objects.filter(pk=a.pk).update(cluster_id=cluster, job_id=job_of(a.pod))
    held = {}
    for job_id, pod in Allocation.objects.exclude(job_id=None).values_list("job_id", "pod").distinct():
        held[job_id] = held.get(job_id, 0) + 1
    for job in Job.objects.all():
        total = sum(n for (j, _t), n in replicas.items() if j == job.pk)
        gang = total if job.min_available is None else job.min_available
        count = held.get(job.pk, 0)
        status = ("scheduled" if count and count >= gang else "partly_scheduled" if count
                  else "unschedulable" if job.status == "unschedulable" else "pending")
        Job.objects.filter(pk=job.pk).update(status=status)


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0003_snapshot_import'),
        ('jobs', '0002_job_derived_status'),
    ]

    operations = [
        migrations.AddField(
            model_name='allocation',
            name='cluster',
            field=models.ForeignKey(editable=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='allocations', to='inventory.cluster'),
        ),
        migrations.AddField(
            model_name='allocation',
            name='job',
            field=models.ForeignKey(blank=True, editable=False, help_text="the job whose pod this is (by the pod's name), if any", null=True, on_delete=django.db.models.deletion.CASCADE, related_name='allocations', to='jobs.job'),
        ),
        migrations.RunPython(link, migrations.RunPython.noop),
    ]
