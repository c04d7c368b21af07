"""HTML helpers for the page tests: the grid cells and elements by attribute, via the stdlib parser."""

from __future__ import annotations

import json
from html.parser import HTMLParser


class Cells(HTMLParser):
    """Collects every element carrying data-cpu (thread cells) and rows with a given class."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a))
        if "data-cpu" in a and "t" in a.get("class", "").split():
            self.cells.append(a)


def parse(html: str | bytes) -> Cells:
    p = Cells()
    p.feed(html.decode() if isinstance(html, bytes) else html)
    return p


def grid_cells(html: str | bytes, grid_id: str | None = None) -> list[dict[str, str]]:
    """Thread cells, optionally only those inside the element with `id=grid_id`."""
    text = html.decode() if isinstance(html, bytes) else html
    if grid_id is not None:
        start = text.index(f'id="{grid_id}"')
        text = text[text.rfind("<", 0, start):]
        # the grid div closes before the next top-level sibling; cells of other grids carry other ids
        end = text.find('<div id="cpu-detail"')
        text = text if end < 0 else text[:end]
    return parse(text).cells


def map_data(html: str) -> dict:
    """The cluster map's marks as the page carries them for its script (static/js/cluster-map.js)."""
    return json.loads(html.split('<script id="cluster-map-data" type="application/json">')[1].split("</script>")[0])
