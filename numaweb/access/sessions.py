"""A logged-in session made without a password, for tools that drive the pages (screenshots)."""

from __future__ import annotations

from importlib import import_module

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY


def session_cookie(user, url: str) -> dict:
    """A Playwright-style cookie carrying a new session in which `user` is logged in."""
    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = user._meta.pk.value_to_string(user)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return {"name": settings.SESSION_COOKIE_NAME, "value": store.session_key, "url": url}
