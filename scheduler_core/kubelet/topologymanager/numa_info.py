"""`NUMAInfo` (the kubelet's `numa_info.go`): the machine's NUMA nodes, their distances and the two mask
comparators of the merge, narrowest and closest (ENGINE.md §2.3, §2.4)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import TopologyError
from ...model.bitmask import MASK_BITS, bits_of, is_narrower

# --------------------------------------------------------------------------------------------------
# NUMA info, mask comparators (ENGINE.md §2.2, §2.3)


def narrowest(m1: int, m2: int) -> int:
    """`NUMAInfo.Narrowest`: m1 if it is narrower than m2 (fewer bits, then smaller value), else m2."""
    return m1 if is_narrower(m1, m2) else m2


def distance_row(distances: Mapping[int, Sequence[int] | None], node: int) -> Sequence[int]:
    row = distances.get(node)
    if row is None:
        raise TopologyError(f"no NUMA distances for node {node}")
    return row


def average_distance(distances: Mapping[int, Sequence[int] | None], mask: int) -> float:
    """`CalculateAverageFor`: mean of distances[x][y] over all ordered pairs of set bits, self pairs
    included, summed in float64 in ascending x then y order; 0 for an empty mask."""
    bits = bits_of(mask)
    if not bits:
        return 0.0
    total = 0.0
    terms = 0.0
    for x in bits:
        row = distance_row(distances, x)
        for y in bits:
            if y >= len(row):
                raise TopologyError(f"distance row of NUMA node {x} has no entry for node {y}")
            total += float(row[y])
            terms += 1.0
    return total / terms


@dataclass(frozen=True)
class NUMAInfo:
    """The machine's NUMA nodes (in reported order) and, with prefer-closest, their distance rows."""

    nodes: tuple[int, ...]
    distances: Mapping[int, tuple[int, ...] | None]

    @classmethod
    def build(cls, nodes: Iterable[int], distances: Mapping[Any, Any] | None = None,
              prefer_closest: bool = False) -> NUMAInfo:
        """`NewNUMAInfo`: distances are kept only with prefer-closest, and then every node needs a
        row (else the kubelet's `error getting NUMA distances from cadvisor`)."""
        ids: list[int] = []
        for nid in nodes:
            if type(nid) is not int or not 0 <= nid < MASK_BITS:
                raise TopologyError(f"NUMA node id {nid!r} must be an int in 0-63")
            if nid in ids:
                raise TopologyError(f"NUMA node {nid} is listed twice")
            ids.append(nid)
        rows: dict[int, tuple[int, ...] | None] = dict.fromkeys(ids)
        if prefer_closest:
            given = _int_keys(distances or {})
            for nid in ids:
                row = given.get(nid)
                if not row:
                    raise TopologyError("cannot discover NUMA topology: error getting NUMA distances from "
                                        f"cadvisor (no distances for NUMA node {nid})")
                values = _distance_values(nid, row)
                if len(values) <= max(ids):
                    raise TopologyError(f"distance row of NUMA node {nid} has {len(values)} values; it needs one "
                                        f"per NUMA id up to {max(ids)}")
                rows[nid] = values
        return cls(tuple(ids), rows)

    @property
    def default_mask(self) -> int:
        """DefaultAffinityMask: all machine NUMA nodes."""
        mask = 0
        for nid in self.nodes:
            mask |= 1 << nid
        return mask

    def narrowest(self, m1: int, m2: int) -> int:
        return narrowest(m1, m2)

    def average_for(self, mask: int) -> float:
        return average_distance(self.distances, mask)

    def closest(self, m1: int, m2: int) -> int:
        """`NUMAInfo.Closest`: fewer bits wins; equal counts → lower average distance, then the
        numerically smaller mask."""
        if m1.bit_count() != m2.bit_count():
            return narrowest(m1, m2)
        d1, d2 = self.average_for(m1), self.average_for(m2)
        if d1 == d2:
            return m1 if m1 < m2 else m2
        return m1 if d1 < d2 else m2

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes),
                "distances": {str(n): None if r is None else list(r) for n, r in self.distances.items()}}


def _int_keys(distances: Mapping[Any, Any]) -> dict[int, object]:
    if not isinstance(distances, Mapping):
        raise TopologyError(f"NUMA distances must map a node id to its row, not {distances!r}")
    out = {}
    for key, row in distances.items():
        try:
            nid = int(key)
        except (TypeError, ValueError):
            raise TopologyError(f"NUMA distance key {key!r} is not a node id") from None
        out[nid] = row
    return out


def _distance_values(nid: int, row: object) -> tuple[int, ...]:
    if isinstance(row, (str, bytes)) or not isinstance(row, Iterable):
        raise TopologyError(f"distance row of NUMA node {nid} must be a list of ints, not {row!r}")
    values = tuple(row)
    for v in values:
        if type(v) is not int or not 0 <= v < 1 << 32:
            raise TopologyError(f"distance {v!r} from NUMA node {nid} must be an int in 0..2^32-1")
    return values


MaskWinner = Callable[[int, int], int]
