"""The session's job count as a column, so session lists show it without a COUNT per row; existing
sessions get theirs from the jobs table."""

from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def backfill(apps, schema_editor) -> None:
    session = apps.get_model("scheduling", "SchedulingSession")
    through = session.jobs.through
    counts = (through.objects.filter(schedulingsession_id=OuterRef("pk")).order_by()
              .values("schedulingsession_id").annotate(n=Count("*")).values("n"))
    session.objects.update(job_count=Coalesce(Subquery(counts), 0))  # a session without jobs has no count row


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0006_normalized_results"),
    ]

    operations = [
        migrations.AddField(
            model_name="historicalschedulingsession",
            name="job_count",
            field=models.PositiveIntegerField(default=0, help_text="jobs named at creation (a list shows it without "
                                                                   "counting the jobs table per row)"),
        ),
        migrations.AddField(
            model_name="schedulingsession",
            name="job_count",
            field=models.PositiveIntegerField(default=0, help_text="jobs named at creation (a list shows it without "
                                                                   "counting the jobs table per row)"),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
