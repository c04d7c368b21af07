"""A logged-in session made without a password, for tools that drive the pages (screenshots)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.base_user import AbstractBaseUser

if TYPE_CHECKING:  # Playwright is a dev dependency; its public API takes this type without exporting it
    from playwright._impl._api_structures import SetCookieParam


def session_cookie(user: AbstractBaseUser, url: str) -> SetCookieParam:
    """A Playwright-style cookie carrying a new session in which `user` is logged in."""
    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return {"name": settings.SESSION_COOKIE_NAME, "value": store.session_key, "url": url}
