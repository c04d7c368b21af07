"""The Celery app. Every setting comes from Django settings under the CELERY_ prefix, so one
env-driven settings file decides the broker (file system when embedded, Redis with REDIS_URL)."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

# the embedded queue: kombu's file-system transport with whole-message writes (see numaweb.fsqueue)
TRANSPORT_ALIASES["numaweb-fs"] = "numaweb.fsqueue:Transport"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")

app = Celery("numaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
