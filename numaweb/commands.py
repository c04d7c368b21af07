"""What the product's management commands share."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def require_migrated_database() -> None:
    """Fail with what to do, instead of a traceback, when the database was never migrated."""
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        raise CommandError("the database is not set up: run `python manage.py migrate` first "
                           "(`./dev run` does it for you)")


# the labels the engine gives input it was handed in memory; a command names the file instead
IN_MEMORY_LABELS = ("<bytes>: ", "<text>: ", "snapshot: ")


def engine_message(exc: Exception) -> str:
    """The engine's message for a file, without its label for in-memory input."""
    message = str(exc)
    for label in IN_MEMORY_LABELS:
        message = message.removeprefix(label)
    return message


def plural(count: int, word: str) -> str:
    """`1 NUMA node`, `2 NUMA nodes`."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
