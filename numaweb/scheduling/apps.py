from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "numaweb.scheduling"
    label = "scheduling"
    default_auto_field = "django.db.models.BigAutoField"
