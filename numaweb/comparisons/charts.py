"""Server-rendered SVG charts: no script and no style attributes (a strict Content-Security-Policy
needs no 'unsafe-inline'): geometry is SVG presentation attributes, colour comes from classes in
numaweb.css. Every mark carries data-* attributes (series, category, value) for tests and tools, and
a <title> so a pointer or a screen reader gets the number.

- `bar_chart(title, bars)`: one horizontal bar per (label, value, series); a metric across variants.
- `column_chart(title, categories, series)`: grouped vertical columns (e.g. the single-NUMA block
  histogram: size bins × variants, or NUMA span per pod with one series), each labelled with its value (a
  bar of 3 among 9,000 is invisible, its number is not).
- `heat_strip(title, nodes)`: one cell per NUMA node, shaded by the share of its CPUs in use."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape  # the standard library's: Django's, lazy-aware, took half of a 5,000-node strip

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

SERIES_CLASSES = 8  # .series-0 … .series-7 in numaweb.css, then they repeat
HEAT_LEVELS = 6  # .heat-0 (idle) … .heat-5 (full)
VALUE_CHAR_PX = 6  # a digit of .chart-value (10px) is about this wide
#: heat strips above this many NUMA nodes average neighbours into one cell: 1.2 px a cell on the 960 px strip, and
#: the strip of a 5,000-node cluster (15,000 NUMA nodes) about 165 KB (1,200 cells made it 254 KB)
MAX_CELLS = 800


def _num(value: float | int | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return f"{int(value):,}"


def _f(x: float) -> str:
    """A coordinate with one decimal (format_html escapes arguments to strings, so format first)."""
    return f"{x:.1f}"


def _svg(width: int, height: int, title: str, body: SafeString, kind: str) -> SafeString:
    return format_html('<svg class="chart chart-{}" data-chart="{}" viewBox="0 0 {} {}" width="{}" height="{}" '
                       'role="img" aria-label="{}"><title>{}</title>{}</svg>',
                       kind, kind, width, height, width, height, title, title, body)


def bar_chart(title: str, bars: Sequence[tuple[str, float | int | None, int]], width: int = 360,
              label_width: int = 150) -> SafeString:
    """Horizontal bars on a common zero; None values are drawn as "–" with no bar."""
    row, top = 22, 4
    top_value = max((v for _l, v, _s in bars if v is not None), default=0) or 1
    span = width - label_width - 48
    parts = []
    for i, (label, value, series) in enumerate(bars):
        y = top + i * row
        length = 0 if value is None else max(0.0, value) / top_value * span
        parts.append(format_html(
            '<g class="chart-row"><text class="chart-label" x="{}" y="{}" text-anchor="end">{}</text>'
            '<rect class="chart-bar series-{}" data-series="{}" data-value="{}" x="{}" y="{}" width="{}" '
            'height="{}"><title>{}: {}</title></rect>'
            '<text class="chart-value" x="{}" y="{}">{}</text></g>',
            label_width - 6, y + 14, label, series % SERIES_CLASSES, series, "" if value is None else value,
            label_width, y + 3, _f(length), row - 6, label, _num(value), _f(label_width + length + 4), y + 14,
            _num(value)))
    return _svg(width, top + row * len(bars) + 4, title, mark_safe("".join(parts)), "bars")


def column_chart(title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[int | float], int]],
                 width: int = 560, height: int = 220, x_label: str = "") -> SafeString:
    """Grouped columns: for each category one column per series (label, values by category, index)."""
    left, right, top, bottom = 40, 8, 16, 34  # room above the tallest column for its value
    group = (width - left - right) / max(1, len(categories))
    col = max(2.0, (group - 6) / max(1, len(series)))
    # values wider than their column stand upright above it (else neighbours' numbers run into each other)
    longest = max((len(_num(v)) for _l, values, _s in series for v in values), default=1) * VALUE_CHAR_PX
    upright = longest > col
    if upright:
        top = int(longest) + 6
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = max((v for _l, values, _s in series for v in values), default=0) or 1
    parts = [format_html('<line class="chart-axis" x1="{}" y1="{}" x2="{}" y2="{}"/>', left, top + plot_h,
                         width - right, top + plot_h),
             format_html('<text class="chart-tick" x="{}" y="{}" text-anchor="end">{}</text>', left - 4, top + 10,
                         _num(top_value)),
             format_html('<text class="chart-tick" x="{}" y="{}" text-anchor="end">0</text>', left - 4, top + plot_h)]
    for c, category in enumerate(categories):
        x0 = left + c * group + 3
        parts.append(format_html('<text class="chart-tick" x="{}" y="{}" text-anchor="middle">{}</text>',
                                 _f(x0 + (group - 6) / 2), top + plot_h + 14, category))
        for s, (label, values, index) in enumerate(series):
            value = values[c]
            h = value / top_value * plot_h
            x, y = _f(x0 + s * col + col / 2), _f(top + plot_h - h - 3)
            turn = format_html(' transform="rotate(-90 {} {})" dy="0.35em"', x, y) if upright else ""
            parts.append(format_html(
                '<rect class="chart-bar series-{}" data-series="{}" data-category="{}" data-value="{}" x="{}" '
                'y="{}" width="{}" height="{}"><title>{} · {}: {}</title></rect>'
                '<text class="chart-value" data-category="{}" data-series="{}" x="{}" y="{}" '
                'text-anchor="{}"{}>{}</text>',
                index % SERIES_CLASSES, index, category, value, _f(x0 + s * col), _f(top + plot_h - h),
                _f(max(1.0, col - 1)), _f(h), label, category, _num(value),
                category, index, x, y, "start" if upright else "middle", turn, _num(value)))
    if x_label:
        parts.append(format_html('<text class="chart-tick" x="{}" y="{}" text-anchor="middle">{}</text>',
                                 left + plot_w / 2, height - 4, x_label))
    return _svg(width, height, title, mark_safe("".join(parts)), "columns")


def legend(series: Sequence[tuple[str, int]]) -> SafeString:
    """Swatches naming the series (same classes as the marks, so colour is never the only cue: the
    marks' titles name their series too)."""
    items = format_html_join(
        "", '<li><svg class="swatch" viewBox="0 0 12 12" width="12" height="12" aria-hidden="true">'
            '<rect class="series-{}" width="12" height="12"/></svg> {}</li>',
        ((index % SERIES_CLASSES, label) for label, index in series))
    return format_html('<ul class="chart-legend">{}</ul>', items)


def heat_strip(title: str, nodes: Sequence[dict], width: int = 960, height: int = 18) -> SafeString:
    """One cell per NUMA node of every node (in node order), shaded by CPUs in use / CPUs it can hand
    out; above MAX_CELLS NUMA nodes, each cell averages that many neighbours (its title says which)."""
    cells = [(n["node"], i, free, cap) for n in nodes for i, (free, cap) in enumerate(n["numa"])]
    per = max(1, -(-len(cells) // MAX_CELLS))
    groups = [cells[i:i + per] for i in range(0, len(cells), per)]
    w = width / max(1, len(groups))
    cell = _f(max(w - (0.5 if w > 3 else 0), 0.5))
    parts = []
    for g, members in enumerate(groups):
        cap = sum(c for *_x, c in members)
        used = cap - sum(f for _n, _i, f, _c in members)
        share = used / cap if cap else 0.0
        level = min(HEAT_LEVELS - 1, round(share * (HEAT_LEVELS - 1)))
        first, last = members[0], members[-1]
        node, last_node = escape(first[0], quote=True), escape(last[0], quote=True)
        where = f"{node} N{first[1]}" if per == 1 else f"{node} N{first[1]} … {last_node} N{last[1]}"
        parts.append(f'<rect class="heat heat-{level}" data-node="{node}" data-numa="{first[1]}" data-used="{used}" '
                     f'data-capacity="{cap}" x="{_f(g * w)}" width="{cell}" height="{height}">'
                     f"<title>{where}: {used} of {cap} CPUs in use</title></rect>")
    return _svg(width, height, title, mark_safe("".join(parts)), "heat")  # names escaped above, the rest numbers


def span_chart(counts: dict[str, int]) -> SafeString:
    """The session page's NUMA span per pod: pods by NUMA nodes spanned (compare.span_histogram)."""
    return column_chart("pods by the number of NUMA nodes they span", list(counts),
                        [("pods", list(counts.values()), 0)], width=700, height=200,
                        x_label="NUMA nodes holding the pod's CPUs, memory and devices")


def heat_legend() -> SafeString:
    """The heat strip's shades, idle to full, with words at both ends and the middle."""
    words = {0: "idle", (HEAT_LEVELS - 1) // 2 + 1: "half", HEAT_LEVELS - 1: "full"}
    return format_html('<span class="heat-legend">{}</span>', format_html_join(
        "", '<svg class="swatch" viewBox="0 0 12 12" width="12" height="12" aria-hidden="true"><rect class="heat '
            'heat-{}" width="12" height="12"/></svg> {} ',
        ((level, words.get(level, "")) for level in range(HEAT_LEVELS))))


__all__ = ["bar_chart", "column_chart", "heat_legend", "heat_strip", "legend", "span_chart"]
