"""Uploaded snapshots kept between the import page's preview and its confirmation: a file under
`DATA_DIR/imports/` named by a random token (the form carries only the token), removed once imported;
files older than an hour are removed whenever a new one is kept.

A kept file is bound to what its preview was: the user who asked, the cluster and the options (prune,
allow_empty), kept beside it. A confirmation that differs in any of them is refused (NotThePreview) and nothing
is imported: another admin cannot confirm someone's preview into another cluster, and a prune added at
confirmation cannot remove nodes the preview never showed."""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

from django.conf import settings

MAX_AGE = 3600
_TOKEN = re.compile(r"[0-9a-f]{32}")


class NotThePreview(Exception):
    """The confirmation asks for something other than what its preview showed; the message says what."""


def _folder() -> Path:
    folder = Path(settings.DATA_DIR) / "imports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def keep(data: bytes, bound: dict[str, Any]) -> str:
    """Store `data` and what its preview was (`bound`: user, cluster, options); returns its token."""
    folder = _folder()
    cutoff = time.time() - MAX_AGE
    for old in folder.iterdir():
        if old.stat().st_mtime < cutoff:
            old.unlink(missing_ok=True)
    token = secrets.token_hex(16)
    (folder / f"{token}.json").write_text(json.dumps(bound, sort_keys=True))
    (folder / token).write_bytes(data)
    return token


def read(token: str, bound: dict[str, Any]) -> bytes | None:
    """The data kept under `token` (None: unknown, expired or malformed token); NotThePreview when `bound`
    differs from what the preview was."""
    if not _TOKEN.fullmatch(token or ""):
        return None
    path = _folder() / token
    meta = path.with_name(f"{token}.json")
    if not path.is_file() or not meta.is_file():
        return None
    previewed = json.loads(meta.read_text())
    differs = [key for key in sorted(set(previewed) | set(bound)) if previewed.get(key) != bound.get(key)]
    if differs:
        shown = ", ".join(f"{key} {previewed.get(key)!r}" for key in differs if key != "user")
        raise NotThePreview("this confirmation is not the preview's: " + (
            "the preview was made by another user" if "user" in differs else f"the preview was for {shown}")
            + "; preview the file again")
    return path.read_bytes()


def forget(token: str) -> None:
    if _TOKEN.fullmatch(token or ""):
        (_folder() / token).unlink(missing_ok=True)
        (_folder() / f"{token}.json").unlink(missing_ok=True)
