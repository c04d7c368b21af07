"""Names (nodes, pods, namespaces, containers) are printable text: a newline or another control character
in a name could end a line of a generated script or file and start another (a pod name with a newline once
ran a command from make room's plan.sh). Every way in checks names here: the engine's Node, Pod, Container
and Allocation, and through them every importer and the web's validators."""

from __future__ import annotations

from ..errors import EngineError, RequestError


def check_printable(value: str, what: str, error: type[EngineError] = RequestError, field: str | None = None) -> None:
    """Raise `error` (naming `what` and `field`) when `value` holds a character that is not printable: a
    control character (newline, tab, NUL, ESC...), a line or paragraph separator, or other invisible format
    characters (`str.isprintable`: every Unicode "Other" and "Separator" but the space)."""
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise error(f"{what} {value[:80]!r} holds the character {bad!r} (U+{ord(bad):04X}): names must be "
                    "printable, without newlines or other control characters", field)
