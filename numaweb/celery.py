"""The Celery app. Every setting comes from Django settings under the CELERY_ prefix, so one
env-driven settings file decides the broker (file system when embedded, Redis with REDIS_URL)."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

from numaweb.startup import prepare

# the embedded queue: kombu's file-system transport with whole-message writes (see numaweb.fsqueue)
TRANSPORT_ALIASES["numaweb-fs"] = "numaweb.fsqueue:Transport"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")

app = Celery("numaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _prepare(**_: object) -> None:
    """A worker started on its own (compose's `celery -A numaweb worker`) makes the data folder and the key as
    manage.py does, when it first reads its configuration (before Django's settings)."""
    prepare()


app.on_configure.connect(_prepare, weak=False)
