"""Pause Python's cyclic garbage collector around a large batch of work.

A session allocates millions of objects that live until it ends (verdicts, rows, records) and makes
almost no reference cycles. The collector's full passes traverse all of them again and again: at
5,000 nodes x 10,000 pods they were a third of the session. Reference counting still frees what
dies; cycles made meanwhile are collected once the collector runs again.

When the block ends, what it allocated is moved to the oldest generation at once (freeze, then
unfreeze: two list splices) instead of being traversed by the first young collection after it, which
would promote the survivors there anyway: at 10,000 nodes x 20,000 pods that pass alone was 0.8 s, a
seventh of a session. A later full collection still finds any cycle among them. A process that froze
objects itself (`gc.freeze` before forking) is left as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; restore its previous state after (nesting is safe)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
