"""Policy `best-effort` (the kubelet's `policy_best_effort.go`): the merged hint is used whatever it is;
every pod is admitted."""

from __future__ import annotations

from .hint import TopologyHint


class BestEffortPolicy:
    name = "best-effort"
    merges = True
    uses_closest = True

    def filter(self, lists: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
        return lists

    def finish(self, hint: TopologyHint, default_mask: int) -> TopologyHint:
        return hint

    def can_admit(self, hint: TopologyHint) -> bool:
        return True
