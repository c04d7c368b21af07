"""What the product's management commands share."""

from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def require_migrated_database() -> None:
    """Fail with what to do, instead of a traceback, when the database was never migrated."""
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        raise CommandError("the database is not set up: run `python manage.py migrate` first "
                           "(`./dev run` does it for you)")
