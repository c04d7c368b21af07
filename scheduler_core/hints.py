"""Topology hints (kubelet-spec §2.2). Placeholder holding only `TopologyHint`; owned by H1."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """A NUMA placement: `affinity` is a NUMA mask int (bit i = node i), None = nil ("any")."""

    affinity: int | None
    preferred: bool
