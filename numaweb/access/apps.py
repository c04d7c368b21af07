from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccessConfig(AppConfig):
    name = "numaweb.access"
    label = "access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .roles import sync_roles_after_migrate

        # models added later (another app, a history table) join the roles on the next migrate
        post_migrate.connect(sync_roles_after_migrate, dispatch_uid="access-sync-roles")
