"""At most NUMAWEB_HEADROOM_CONCURRENCY headroom questions at a time in each web process; one more is refused at
once (429 with Retry-After) instead of queueing. A headroom question is a dry-run session computed in the request's
thread for up to NUMAWEB_HEADROOM_SECONDS: twenty of them at once shared the process's interpreter with every other
request and pushed other users' p99 from 0.04 s to 4.7 s."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from django.conf import settings

_slots: dict[int, threading.BoundedSemaphore] = {}
_made = threading.Lock()


class Busy(Exception):
    """Every headroom slot of this process is taken; `retry_after` says when to ask again (seconds)."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"{settings.NUMAWEB_HEADROOM_CONCURRENCY} headroom question(s) are being answered already "
                         f"(NUMAWEB_HEADROOM_CONCURRENCY): ask again in {retry_after} s")


@contextlib.contextmanager
def headroom_slot() -> Iterator[None]:
    """Hold one of the process's headroom slots for the block, or raise Busy at once."""
    limit = settings.NUMAWEB_HEADROOM_CONCURRENCY
    with _made:
        slots = _slots.setdefault(limit, threading.BoundedSemaphore(limit))
    if not slots.acquire(blocking=False):
        raise Busy(max(1, settings.NUMAWEB_HEADROOM_SECONDS))
    try:
        yield
    finally:
        slots.release()
