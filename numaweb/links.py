"""Links to one object by id, for lists that show many: the view's URL is reversed once per process
(and script prefix) with a stand-in id, and each row's link is the two parts around it."""

from __future__ import annotations

import functools

from django.urls import get_script_prefix, reverse

_SENTINEL = 987654321  # an id to reverse with and cut out again (routes take digits only)


def id_link(view: str) -> tuple[str, str]:
    """(before the id, after it) of the path of `view` for one object."""
    return _parts(view, get_script_prefix())


@functools.cache
def _parts(view: str, _prefix: str) -> tuple[str, str]:
    head, tail = reverse(view, args=[_SENTINEL]).rsplit(str(_SENTINEL), 1)
    return head, tail
