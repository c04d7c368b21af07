"""Policy `none` (the kubelet's `policy_none.go`): no alignment, nothing merged, every pod admitted."""

from __future__ import annotations

from .hint import TopologyHint


class NonePolicy:
    name = "none"
    merges = False
    uses_closest = False

    def filter(self, lists: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
        return lists

    def finish(self, hint: TopologyHint, default_mask: int) -> TopologyHint:
        return hint

    def can_admit(self, hint: TopologyHint) -> bool:
        return True
