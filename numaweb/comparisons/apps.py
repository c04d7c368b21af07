from django.apps import AppConfig


class ComparisonsConfig(AppConfig):
    name = "numaweb.comparisons"
    verbose_name = "comparisons"
