"""`manage.py create_user NAME --role viewer|operator|admin|agent [--password P] [--cluster C]`: create or
update a user. An agent (a node agent's account) is bound to the one cluster `--cluster` names (required for
it, refused for the others): its token may only send reports for that cluster's nodes.

Prints the user's API token as the last word of the last line, so scripts can take it with `awk`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from numaweb.access.roles import AGENT, ALL_ROLES, set_role
from numaweb.access.tokens import current_token
from numaweb.commands import require_migrated_database
from numaweb.inventory.models import AgentBinding, Cluster


class Command(BaseCommand):
    help = ("Create or update a user with a role (viewer, operator, admin, or agent bound to --cluster); prints its "
            "API token last.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--role", required=True, choices=ALL_ROLES)
        parser.add_argument("--password", help="set this password (a new user without one can only use the token)")
        parser.add_argument("--cluster", help="agent only: the name of the cluster whose nodes it reports")

    def handle(self, *args: Any, name: str, role: str, password: str | None, cluster: str | None,
               **options: Any) -> None:
        require_migrated_database()
        bound = self._cluster(role, cluster)
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
            if bound is None:
                AgentBinding.objects.filter(user=user).delete()
            else:
                AgentBinding.objects.update_or_create(user=user, defaults={"cluster": bound})
            token = current_token(user)
        what = f"{role} of cluster {bound.name}" if bound is not None else role
        self.stdout.write(f"{'created' if created else 'updated'} {name} ({what}); API token: {token.key}")

    @staticmethod
    def _cluster(role: str, name: str | None) -> Cluster | None:
        """The cluster an agent is bound to (required for an agent, refused for the other roles)."""
        if role != AGENT:
            if name is not None:
                raise CommandError(f"--cluster: only an agent is bound to a cluster, not a {role}")
            return None
        if not name:
            raise CommandError("--cluster: an agent needs the cluster whose nodes it reports")
        found = Cluster.objects.filter(name=name).first()
        if found is None:
            raise CommandError(f"--cluster: no cluster named {name!r} (create it first, or import a snapshot)")
        return found
