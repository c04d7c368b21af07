"""The cluster of every allocation is now known (0004): make it required and let the database refuse a
second allocation for one pod container in a cluster. (A separate migration: PostgreSQL cannot alter a
table in the transaction that just updated its rows.)"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0004_allocation_one_holder'),
    ]

    operations = [
        migrations.AlterField(
            model_name='allocation',
            name='cluster',
            field=models.ForeignKey(editable=False, help_text="the node's cluster (copied on save, for the one-holder constraint)", on_delete=django.db.models.deletion.CASCADE, related_name='allocations', to='inventory.cluster'),
        ),
        migrations.AddConstraint(
            model_name='allocation',
            constraint=models.UniqueConstraint(fields=('cluster', 'pod', 'container'), name='allocation_one_per_pod_container'),
        ),
    ]
