"""numaweb: the Django project (inventory, jobs, scheduling sessions, REST API) around the
pure-Python engine `scheduler_core`. The Celery app is loaded with Django so `@shared_task` binds to it."""

from .celery import app as celery_app

__all__ = ["celery_app"]
