"""Every request a page makes, watched: a network failure or an error status on any of them (a stylesheet,
htmx, a polled fragment) fails the test that made it."""

from __future__ import annotations

from playwright.sync_api import Page


def watch_failed_requests(page: Page) -> list[str]:
    """A list that fills with "METHOD url: why" for each request that failed or answered 4xx/5xx."""
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(f"{r.method} {r.url}: {r.failure}"))
    page.on("response", lambda r: failed.append(f"{r.request.method} {r.url}: HTTP {r.status}")
            if r.status >= 400 else None)
    return failed
