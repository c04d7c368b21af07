"""Small display filters for the pages."""

from collections.abc import Iterable, Mapping

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from numaweb.links import id_link
from numaweb.scheduling.store import mask_of
from scheduler_core.model.bitmask import bits_of
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.quantity import format_bytes

register = template.Library()


@register.filter
def node_link(name: str | None, ids: Mapping[str, int] | None) -> str:
    """A node's name as a link to its page (`ids`: name → id in the cluster); the bare name when not known."""
    if not name:
        return ""
    pk = (ids or {}).get(name)
    if pk is None:
        return name
    head, tail = id_link("pages:node")
    return format_html('<a class="node-link" href="{}{}{}">{}</a>', head, pk, tail, name)


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

    return len(CPUSet.parse(value or ""))


@register.filter
def join_ids(values: Iterable[object] | None) -> str:
    return ",".join(str(v) for v in values or ())


@register.filter
def mask_ids(value: int | None) -> str:
    """A stored NUMA mask (scheduling.store's signed form) as its ids, "0,2"; empty for none."""

    mask = mask_of(value)
    return ",".join(map(str, bits_of(mask))) if mask else ""


@register.filter
def cpu_list(value: str | None) -> SafeString:
    """A CPU list ("8-12,40-43") that breaks only after a comma, never inside a range."""
    from django.utils.html import format_html_join
    from django.utils.safestring import mark_safe

    parts = [p for p in (value or "").split(",") if p]
    return mark_safe(",<wbr>".join(format_html_join("", '<span class="nowrap">{}</span>', [(p,)]) for p in parts))
