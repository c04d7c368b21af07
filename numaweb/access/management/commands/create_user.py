"""`manage.py create_user NAME --role viewer|operator|admin [--password P]`: create or update a user.

Prints the user's API token as the last word of the last line, so scripts can take it with `awk`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from numaweb.access.roles import ROLES, set_role
from numaweb.access.tokens import current_token
from numaweb.commands import require_migrated_database


class Command(BaseCommand):
    help = "Create or update a user with a role (viewer, operator, admin); prints its API token last."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument("--password", help="set this password (a new user without one can only use the token)")

    def handle(self, *args: Any, name: str, role: str, password: str | None, **options: Any) -> None:
        require_migrated_database()
        User = get_user_model()
        try:
            User._meta.get_field("username").run_validators(name)
        except ValidationError as exc:
            raise CommandError(f"user name {name!r}: {' '.join(exc.messages)}") from None
        with transaction.atomic():
            user, created = User.objects.get_or_create(username=name)
            if password is not None:
                try:
                    validate_password(password, user)
                except ValidationError as exc:
                    raise CommandError(f"--password: {' '.join(exc.messages)}") from None
                user.set_password(password)
            elif created:
                user.set_unusable_password()
            user.save()
            set_role(user, role)
            token = current_token(user)
        self.stdout.write(f"{'created' if created else 'updated'} {name} ({role}); API token: {token.key}")
