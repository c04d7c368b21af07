"""WorkerHeartbeat moves to the worker app (numaweb.worker): its table stays where it is, only Django's
record of which app owns it changes (worker 0001 takes it over)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0009_placement_pod_index'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='WorkerHeartbeat')],
            database_operations=[],
        ),
    ]
