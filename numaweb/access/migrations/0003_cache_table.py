"""The database cache's table (settings.CACHES without Redis), so `migrate` alone sets up what the API's
throttles count in; createcachetable leaves an existing table alone."""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("access", "0002_roles")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
