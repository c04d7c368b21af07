from django.apps import AppConfig


class PagesConfig(AppConfig):
    """The HTMX pages: dashboard, node grid, jobs, sessions (views on the services, no rules here)."""

    name = "numaweb.pages"
    label = "pages"
    verbose_name = "numaweb pages"
