"""The migrations are Django's own output (ruff skips them): they must match the models exactly."""

from io import StringIO

from django.core.management import call_command


def test_models_and_migrations_agree(db):
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits non-zero when a migration is missing
        raise AssertionError(f"models changed without a migration:\n{out.getvalue()}") from exc
