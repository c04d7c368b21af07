from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate, pre_save


class AccessConfig(AppConfig):
    name = "numaweb.access"
    label = "access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .roles import sync_roles_after_migrate
        from .tokens import revoke_on_password_change

        # models added later (another app, a history table) join the roles on the next migrate
        post_migrate.connect(sync_roles_after_migrate, dispatch_uid="access-sync-roles")
        # a new password ends the user's API tokens
        pre_save.connect(revoke_on_password_change, sender=settings.AUTH_USER_MODEL,
                         dispatch_uid="access-revoke-tokens")
