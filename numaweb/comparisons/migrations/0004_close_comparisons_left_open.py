"""Close the comparisons an earlier version left open: when housekeeping failed a comparison's last variant (its
worker lost, or past the hard time limit), nothing closed the comparison, and its page said "running" for ever.
Every comparison none of whose variants is left to run gets the time its last variant ended."""

from django.db import migrations
from django.db.models import Max, Q
from django.utils import timezone


def close_left_open(apps, schema_editor):
    Comparison = apps.get_model("comparisons", "Comparison")
    left_open = (Comparison.objects.filter(finished_at=None, variants__isnull=False)
                 .exclude(variants__status__in=("pending", "running")).distinct()
                 .annotate(ended=Max("variants__finished_at", filter=Q(variants__finished_at__isnull=False))))
    for comparison in left_open:
        Comparison.objects.filter(pk=comparison.pk).update(finished_at=comparison.ended or timezone.now())


class Migration(migrations.Migration):

    dependencies = [("comparisons", "0003_variant_run_columns")]

    operations = [migrations.RunPython(close_left_open, migrations.RunPython.noop)]
