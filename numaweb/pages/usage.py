"""Per-node CPU usage for the dashboard, cached per node `generation`.

Free CPUs per NUMA node come from the engine's node (inventory.engine_nodes), built only for nodes whose
generation changed since this process last saw them: every allocation write advances the generation,
so a cached entry is exact until then. A 5,000-node dashboard therefore filters, counts and pages on
small tuples; only the page shown is rendered, each card as a strip of NUMA usage bars."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db.models import CharField
from django.db.models.functions import Cast
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Node

from . import grid


@dataclass(frozen=True)
class Usage:
    """A node's free CPUs: in total and per NUMA node as (NUMA id, free, CPUs)."""

    version: tuple  # (generation, updated_key): allocation writes advance the first, node edits the second
    free: int
    numa: tuple[tuple[int, int, int], ...]
    error: str = ""
    reserved: tuple[int, ...] = ()  # reserved CPUs of each NUMA node, in the order of `numa`

    @property
    def best_numa_free(self) -> int:
        return max((free for _n, free, _t in self.numa), default=0)


_CACHE: dict[int, Usage] = {}


#: annotated as `updated_key`: `updated_at` as the database's text, for a node's version (generation,
#: updated_key). A string compares as exactly as the timestamp, and reading 5,000 of them costs nothing, where
#: Django's conversion of each to an aware datetime was the largest part of the dashboard's CPU time.
UPDATED_KEY = Cast("updated_at", CharField())


def usage_of(rows: Sequence[tuple[int, tuple]]) -> dict[int, Usage]:
    """{node id: Usage} for (id, (generation, updated_key)) pairs (`UPDATED_KEY`); builds engine nodes only for
    the stale ones."""
    stale = [pk for pk, version in rows if (u := _CACHE.get(pk)) is None or u.version != version]
    for start in range(0, len(stale), 500):
        chunk = Node.objects.filter(pk__in=stale[start:start + 500]).annotate(updated_key=UPDATED_KEY)
        for (pk, _name, generation, updated_at), node in inventory.engine_nodes(chunk, "updated_key"):
            version = (generation, updated_at)
            if isinstance(node, Exception):
                _CACHE[pk] = Usage(version, 0, (), inventory.topology_error(node))
                continue
            numa = tuple(sorted(grid.numa_usage(node)))
            mask, numa_cpus = node.reserved_cpus.mask, node.topology.numa_cpus
            reserved = tuple((numa_cpus[n] & mask).bit_count() for n, _f, _t in numa)
            _CACHE[pk] = Usage(version, node.free_cpus.bit_count(), numa, reserved=reserved)
    return {pk: _CACHE[pk] for pk, _g in rows if pk in _CACHE}


def by_numa_size(usages: Iterable[Usage]) -> list[dict]:
    """Free CPUs grouped by NUMA node size (CPUs per NUMA node): NUMA nodes, CPUs, free, and how many
    of those NUMA nodes are entirely free — what a single-numa-node pod of that size can still get."""
    sizes: dict[int, list[int]] = {}
    for u in usages:
        for _n, free, total in u.numa:
            entry = sizes.setdefault(total, [0, 0, 0])
            entry[0] += 1
            entry[1] += free
            entry[2] += free == total
    return [{"size": size, "numa_nodes": n, "cpus": size * n, "free": free, "empty": empty}
            for size, (n, free, empty) in sorted(sizes.items())]


def strip(name: str, usage: Usage) -> SafeString:
    """A card's NUMA usage strip: one labelled bar per NUMA node, its reserved then its used share filled
    (the thread grid is on the node page; `LEGEND` names the colours). Values are ints; the name goes
    through escape."""
    if usage.error:
        return mark_safe(f'<p class="error">{escape(usage.error)}</p>')
    reserved = usage.reserved
    label = ", ".join(f"NUMA {n}: {free} of {total} free, {r} reserved"
                      for (n, free, total), r in zip(usage.numa, reserved, strict=True))
    out = [f'<div class="strip" role="img" aria-label="{escape(name)}: {label}">']
    for (n, free, total), r in zip(usage.numa, reserved, strict=True):
        # SVG widths, not style attributes: the CSP allows no inline style
        r_pct = round(100 * r / total) if total else 0
        used_pct = max(0, 100 - round(100 * free / total) - r_pct) if total else 0
        out.append(f'<span class="numa-cell"><span class="numa-lbl" aria-hidden="true">N{n}</span>'
                   f'<svg class="numa-bar" data-numa="{n}" data-free="{free}" data-total="{total}" '
                   f'data-reserved="{r}" viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">'
                   f"<title>NUMA {n}: {free}/{total} CPUs free, {r} reserved</title>"
                   f'<rect class="reserved" width="{r_pct}" height="10"/>'
                   f'<rect class="used" x="{r_pct}" width="{used_pct}" height="10"/></svg></span>')
    out.append("</div>")
    return mark_safe("".join(out))


#: the strips' key, drawn with the strips' own classes (numaweb.css), so the two cannot drift apart
LEGEND = mark_safe(
    '<p class="legend-strip" aria-label="usage strip legend">Each bar is one NUMA node (N0, N1, …) of the node: '
    + "".join(f'<span class="key"><svg class="numa-bar swatch-bar" viewBox="0 0 100 10" preserveAspectRatio="none" '
              f'aria-hidden="true"><rect class="{cls}" width="{100 if cls else 0}" height="10"/></svg> {text}</span>'
              for cls, text in (("", "free CPUs"), ("used", "CPUs held by pods"), ("reserved", "reserved CPUs")))
    + "</p>")
