"""The roles viewer, operator and admin as groups with their permissions (numaweb.access.roles)."""

from django.db import migrations


def create_roles(apps, schema_editor):
    from numaweb.access.roles import sync_roles

    sync_roles(apps)


def remove_roles(apps, schema_editor):
    from numaweb.access.roles import ROLES

    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("access", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("inventory", "0002_initial"),
        ("jobs", "0001_initial"),
        ("scheduling", "0002_session_heartbeat_worker"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
