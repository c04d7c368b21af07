"""The Celery app. Every setting comes from Django settings under the CELERY_ prefix, so one
env-driven settings file decides the broker (file system when embedded, Redis with REDIS_URL)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")

app = Celery("numaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
