"""Progress bars for long management commands (a large demo, a large import, a session): drawn on stderr when
it is a terminal, nothing at all when the output is piped or captured (scripts, CI, logs)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def bar(total: int, desc: str, unit: str = "it", enabled: bool = True) -> tqdm:
    """A tqdm bar that is only drawn when `enabled` and stderr is a terminal; a no-op object otherwise."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=not (enabled and sys.stderr.isatty()))


def bar_over(items: Iterable[T], total: int, desc: str, enabled: bool = True) -> Iterator[T]:
    """The items, counted on a bar (see `bar`) as they are taken."""
    with bar(total, desc, enabled=enabled) as progress:
        for item in items:
            yield item
            progress.update()
