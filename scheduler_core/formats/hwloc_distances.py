"""hwloc XML's NUMA distances (hwloc_xml reads the rest of the file).

- Distances: v2/v3 `distances2` of type NUMANode (prefer name NUMALatency, then latency kind),
  `indexing` os or gp, ids over several `indexes` and values over several `u64values`
  (hwloc writes ten per element); v1 `distances` whose objects at
  `relative_depth` below the holder are all the NUMA nodes, in tree order, scaled by
  `latency_base`.
"""

from __future__ import annotations

from ..errors import FormatError
from ._values import parse_int
from .hwloc_objects import Element, numa_id, object_type


def _values(el: Element, what: str) -> list[int]:
    out = []
    for part in el:
        if part.tag == "u64values":
            for tok in (part.text or "").split():
                out.append(parse_int(tok, what))
    return out


def distances_v2(root: Element, gp_to_numa: dict[str, int]) -> dict[int, dict[int, int]] | None:
    """v2/v3: the `distances2` matrix of NUMANodes (NUMALatency first, then a latency kind), by os index."""
    candidates: list[tuple[int, int, Element]] = []
    for el in root:
        if el.tag != "distances2" or el.get("type") != "NUMANode":
            continue
        kind = parse_int(el.get("kind", "0"), "hwloc XML: distances2 kind")
        name = el.get("name") or ""
        rank = 0 if name == "NUMALatency" else (1 if kind & 4 else 2)
        candidates.append((rank, len(candidates), el))
    if not candidates:
        return None
    el = min(candidates, key=lambda c: c[:2])[2]
    n = parse_int(el.get("nbobjs", "0"), "hwloc XML: distances2 nbobjs", 1)
    if n > 4096:
        raise FormatError(f"hwloc XML: distances2 nbobjs={n} is too large")
    indexing = el.get("indexing", "os")
    idx_els = [c for c in el if c.tag == "indexes"]
    if not idx_els:
        raise FormatError("hwloc XML: <distances2> without <indexes>")
    # hwloc writes ten ids per <indexes> element (as it does ten values per <u64values>)
    raw_ids = [tok for c in idx_els for tok in (c.text or "").split()]
    if len(raw_ids) != n:
        raise FormatError(f"hwloc XML: <distances2> lists {len(raw_ids)} indexes for nbobjs={n}")
    ids = []
    for tok in raw_ids:
        if indexing == "gp":
            if tok not in gp_to_numa:
                raise FormatError(f"hwloc XML: <distances2> names gp_index {tok}, which is no NUMA node")
            ids.append(gp_to_numa[tok])
        else:
            ids.append(parse_int(tok, "hwloc XML: <distances2> index"))
    values = _values(el, "hwloc XML: <distances2> value")
    if len(values) != n * n:
        raise FormatError(f"hwloc XML: <distances2> has {len(values)} values for {n}x{n} objects")
    return {a: {b: values[i * n + j] for j, b in enumerate(ids)} for i, a in enumerate(ids)}


def distances_v1(blocks: list[tuple[Element, int]],
                 depth_objects: dict[int, list[Element]]) -> dict[int, dict[int, int]] | None:
    """v1: the first `distances` block (with the depth of its holder) whose objects are all the NUMA nodes."""
    total_numa = len([o for objs in depth_objects.values() for o in objs if object_type(o) == "NUMANode"])
    for el, holder_depth in blocks:
        rel = parse_int(el.get("relative_depth", "0"), "hwloc XML: distances relative_depth")
        objs = depth_objects.get(holder_depth + rel, [])
        n = parse_int(el.get("nbobjs", "0"), "hwloc XML: distances nbobjs", 1)
        if not objs or any(object_type(o) != "NUMANode" for o in objs) or len(objs) != n or n != total_numa:
            continue
        try:
            base = float(el.get("latency_base", "1"))
            lat = [float(c.get("value", "nan")) for c in el if c.tag == "latency"]
        except ValueError:
            raise FormatError("hwloc XML: <distances> latency values must be numbers") from None
        if len(lat) != n * n or any(v != v or v < 0 or v > 1e9 for v in lat):
            raise FormatError(f"hwloc XML: <distances> has {len(lat)} valid latencies for {n}x{n} objects")
        ids = [numa_id(o) for o in objs]
        return {a: {b: round(lat[i * n + j] * base) for j, b in enumerate(ids)} for i, a in enumerate(ids)}
    return None
