"""Per-node CPU usage for the dashboard, cached per node `generation`.

Free CPUs per NUMA node come from the engine's node (inventory.engine_nodes), built only for nodes whose
generation changed since this process last saw them: every allocation write advances the generation,
so a cached entry is exact until then. A 5,000-node dashboard therefore filters, counts and pages on
small tuples; only the page shown is rendered, each card as a strip of NUMA usage bars."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Node

from . import grid


@dataclass(frozen=True)
class Usage:
    """A node's free CPUs: in total and per NUMA node as (NUMA id, free, CPUs)."""

    version: tuple  # (generation, updated_at): allocation writes advance the first, node edits the second
    free: int
    numa: tuple[tuple[int, int, int], ...]
    error: str = ""

    @property
    def best_numa_free(self) -> int:
        return max((free for _n, free, _t in self.numa), default=0)


_CACHE: dict[int, Usage] = {}


def usage_of(rows: Sequence[tuple[int, tuple]]) -> dict[int, Usage]:
    """{node id: Usage} for (id, (generation, updated_at)) pairs; builds engine nodes only for the stale ones."""
    stale = [pk for pk, version in rows if (u := _CACHE.get(pk)) is None or u.version != version]
    for start in range(0, len(stale), 500):
        chunk = Node.objects.filter(pk__in=stale[start:start + 500])
        for (pk, _name, generation, updated_at), node in inventory.engine_nodes(chunk, "updated_at"):
            version = (generation, updated_at)
            if isinstance(node, Exception):
                _CACHE[pk] = Usage(version, 0, (), inventory.topology_error(node))
                continue
            _CACHE[pk] = Usage(version, node.free_cpus.bit_count(), tuple(sorted(grid.numa_usage(node))))
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
    """A card's NUMA usage strip: one bar per NUMA node, its used share filled (the thread grid is on
    the node page). Values are ints; the name goes through escape."""
    if usage.error:
        return mark_safe(f'<p class="error">{escape(usage.error)}</p>')
    label = ", ".join(f"NUMA {n}: {free} of {total} free" for n, free, total in usage.numa)
    out = [f'<div class="strip" role="img" aria-label="{escape(name)}: {label}">']
    for n, free, total in usage.numa:  # SVG widths, not style attributes: the CSP allows no inline style
        used = 100 - round(100 * free / total) if total else 0
        out.append(f'<svg class="numa-bar" data-numa="{n}" data-free="{free}" data-total="{total}" '
                   f'viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">'
                   f"<title>NUMA {n}: {free}/{total} CPUs free</title>"
                   f'<rect class="used" width="{used}" height="10"/></svg>')
    out.append("</div>")
    return mark_safe("".join(out))
