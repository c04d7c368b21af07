"""The roles, kept as Django groups holding model permissions, and who may do what.

- viewer: every `view_*` permission of the project's apps (history included) and `access.browse`.
- operator: viewer + submit and finish jobs, start and re-run sessions, what-if, comparisons, make room.
- admin: every permission of the project's apps (inventory, imports, deletes) + users, groups, API tokens
  and login lock-outs. Superusers are admins.
- agent: a node agent's account, beside the three: `inventory.add_nodereport` only (send reports for the
  nodes of the one cluster its `AgentBinding` names); everything else is 403 for it, reads included.

The groups are created by the `access` data migration and brought back in step after every `migrate`
(post_migrate), so permissions of models added later join the roles without another migration."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.apps import AppConfig
from django.apps import apps as global_apps
from django.apps.registry import Apps
from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest

if TYPE_CHECKING:  # auth's models need the app registry ready: this module is imported before
    from django.contrib.auth.models import AnonymousUser, User

VIEWER, OPERATOR, ADMIN, AGENT = "viewer", "operator", "admin", "agent"
#: the people's roles, each holding the one before it
ROLES = (VIEWER, OPERATOR, ADMIN)
#: every role a user may be given: the node agent's beside the people's
ALL_ROLES = (AGENT, *ROLES)
AGENT_PERMISSIONS = ("inventory.add_nodereport",)
READ_METHODS = ("GET", "HEAD", "OPTIONS")

OPERATOR_PERMISSIONS = (
    "jobs.add_job", "jobs.change_job", "scheduling.add_schedulingsession", "access.run_whatif", "access.compare",
    "room.add_roomplan", "room.add_defragrun",
)
# apps outside numaweb whose permissions the admin role holds: users and groups, API tokens, lock-outs
ADMIN_APPS = ("auth", "authtoken", "axes")


def project_labels() -> list[str]:
    return [c.label for c in global_apps.get_app_configs() if c.name.startswith("numaweb.")]


def _pairs(perms: Iterable[str]) -> Q:
    q = Q(pk__in=[])
    for perm in perms:
        app, codename = perm.split(".", 1)
        q |= Q(content_type__app_label=app, codename=codename)
    return q


def role_filters() -> dict[str, Q]:
    """Each role's permissions as a filter on auth.Permission."""
    project = project_labels()
    viewer = Q(content_type__app_label__in=project, codename__startswith="view_") | _pairs(["access.browse"])
    return {
        VIEWER: viewer,
        OPERATOR: viewer | _pairs(OPERATOR_PERMISSIONS),
        ADMIN: Q(content_type__app_label__in=[*project, *ADMIN_APPS]),
        AGENT: _pairs(AGENT_PERMISSIONS),
    }


def sync_roles(apps: Apps = global_apps) -> None:
    """Create the role groups and give each exactly its permissions (other groups are left alone)."""
    from django.contrib.auth.management import create_permissions

    for config in apps.get_app_configs():  # permissions are otherwise only created after the last migration
        previous = getattr(config, "models_module", None)
        # create_permissions skips apps whose models are not loaded; it only asks whether there is a module
        config.models_module = previous or True  # type: ignore[assignment]  # any true value will do
        try:
            create_permissions(config, verbosity=0, apps=apps)
        finally:
            config.models_module = previous
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, q in role_filters().items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.set(Permission.objects.filter(q))


def sync_roles_after_migrate(sender: AppConfig, apps: Apps = global_apps, **kwargs: Any) -> None:
    if sender.label == "access":
        sync_roles(apps)


def role_of(user: User | AnonymousUser) -> str | None:
    """The highest role the user holds (superusers: admin), None for anonymous or role-less users."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.filter(name__in=ALL_ROLES).values_list("name", flat=True))
    return next((r for r in reversed(ALL_ROLES) if r in names), None)


def set_role(user: User, role: str) -> None:
    """Make `role` the user's only role; admins are staff (the admin site), the others are neither staff
    nor superusers."""
    from django.contrib.auth.models import Group

    if role not in ALL_ROLES:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ALL_ROLES)}")
    user.groups.remove(*Group.objects.filter(name__in=ALL_ROLES))
    user.groups.add(Group.objects.get(name=role))
    user.is_staff = role == ADMIN
    user.is_superuser = user.is_superuser and role == ADMIN
    user.save(update_fields=["is_staff", "is_superuser"])


def is_read_permission(perm: str) -> bool:
    return perm.split(".", 1)[-1].startswith("view_") or perm == "access.browse"


def may(request: HttpRequest, perms: Iterable[str]) -> bool:
    """Whether this request may go ahead: the user holds every permission, or reads are public
    (NUMAWEB_PUBLIC_READ) and this is a read needing only read permissions."""
    perms = list(perms)
    if (settings.NUMAWEB_PUBLIC_READ and request.method in READ_METHODS
            and all(is_read_permission(p) for p in perms)):
        return True
    user = request.user
    return bool(user and user.is_authenticated and user.has_perms(perms))
