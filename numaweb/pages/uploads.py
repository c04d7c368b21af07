"""Uploaded snapshots kept between the import page's preview and its confirmation: a file under
`DATA_DIR/imports/` named by a random token (the form carries only the token), removed once imported;
files older than an hour are removed whenever a new one is kept."""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

from django.conf import settings

MAX_AGE = 3600
_TOKEN = re.compile(r"[0-9a-f]{32}")


def _folder() -> Path:
    folder = Path(settings.DATA_DIR) / "imports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def keep(data: bytes) -> str:
    """Store `data`; returns its token."""
    folder = _folder()
    cutoff = time.time() - MAX_AGE
    for old in folder.iterdir():
        if old.stat().st_mtime < cutoff:
            old.unlink(missing_ok=True)
    token = secrets.token_hex(16)
    (folder / token).write_bytes(data)
    return token


def read(token: str) -> bytes | None:
    """The data kept under `token` (None: unknown, expired or malformed token)."""
    if not _TOKEN.fullmatch(token or ""):
        return None
    path = _folder() / token
    return path.read_bytes() if path.is_file() else None


def forget(token: str) -> None:
    if _TOKEN.fullmatch(token or ""):
        (_folder() / token).unlink(missing_ok=True)
