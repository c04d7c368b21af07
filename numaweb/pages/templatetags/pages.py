"""Small display filters for the pages."""

from django import template

from scheduler_core.model.quantity import format_bytes

register = template.Library()


@register.filter
def as_bytes(value: int | None) -> str:
    """8589934592 → 8Gi (the engine's compact binary form)."""
    return "-" if value is None else format_bytes(int(value))


@register.filter
def yesno_mark(value: bool | None) -> str:
    """A text mark for booleans in tables: ✔ yes / ✘ no / – (colour is never the only signal)."""
    if value is None:
        return "–"
    return "✔ yes" if value else "✘ no"


@register.filter
def cpu_count(value: str) -> int:
    from scheduler_core.model.cpuset import CPUSet

    return len(CPUSet.parse(value or ""))


@register.filter
def join_ids(values) -> str:
    return ",".join(str(v) for v in values or ())
