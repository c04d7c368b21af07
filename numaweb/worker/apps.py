from django.apps import AppConfig


class WorkerConfig(AppConfig):
    name = "numaweb.worker"
    label = "worker"
    verbose_name = "Workers"
