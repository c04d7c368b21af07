"""What the product writes before it starts: the data folder (SQLite, uploads, metrics), the embedded queue's
folder, the collected static files' folder and the secret key kept in the data folder.

Importing the settings only reads, so a type check, a test collection or an import never writes into the
checkout; the entry points call `prepare()` before Django reads the settings: manage.py (every command, `serve`
included), numaweb.asgi and numaweb.wsgi (the web servers), the Celery app when it is configured (a worker), and
the test run (tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from django.conf import settings as django_settings

from numaweb import settings


def prepare() -> None:
    """Make the folders and the secret key the settings name (each only when missing). Called before Django
    reads the settings it hands over the key it wrote; called after (a test run, a worker sending its first
    task), it also sets the key on the settings Django holds."""
    for folder in (settings.DATA_DIR, Path(settings.STATIC_ROOT)):  # WhiteNoise warns about a missing static root
        folder.mkdir(parents=True, exist_ok=True)
    if not settings.REDIS_URL:
        settings.BROKER_DIR.mkdir(parents=True, exist_ok=True)
    if settings.SECRET_KEY:
        return
    settings.SECRET_KEY = _keep_secret_key(settings.SECRET_KEY_FILE)
    if django_settings.configured:
        django_settings.SECRET_KEY = settings.SECRET_KEY


def _keep_secret_key(path: Path) -> str:
    """The key in `path`, written first if there is none. Processes starting together on one folder (compose's web
    and worker on their shared volume) agree on one key: each writes a private draft and links it into place,
    which only the first can do."""
    if not path.exists():
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        draft.write_text(secrets.token_urlsafe(50))
        draft.chmod(0o600)
        try:
            with contextlib.suppress(FileExistsError):
                os.link(draft, path)
        finally:
            draft.unlink()
    return path.read_text().strip()
