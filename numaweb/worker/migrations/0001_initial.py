"""WorkerHeartbeat, taken over from the scheduling app: the table (scheduling_workerheartbeat, created by
scheduling 0004) is kept as it is; only Django's state changes hands."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('scheduling', '0010_workerheartbeat_to_worker_app'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='WorkerHeartbeat',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name='ID')),
                        ('name', models.CharField(help_text='the Celery node name (name@host)', max_length=255,
                                                  unique=True)),
                        ('host', models.CharField(max_length=255)),
                        ('pid', models.PositiveIntegerField()),
                        ('started_at', models.DateTimeField()),
                        ('seen_at', models.DateTimeField(db_index=True)),
                    ],
                    options={'db_table': 'scheduling_workerheartbeat'},
                ),
            ],
            database_operations=[],
        ),
    ]
