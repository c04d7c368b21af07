"""Policy `restricted` (the kubelet's `policy_restricted.go`): best-effort's merge, but only a preferred
hint admits the pod."""

from __future__ import annotations

from .hint import TopologyHint
from .policy_best_effort import BestEffortPolicy


class RestrictedPolicy(BestEffortPolicy):
    name = "restricted"

    def can_admit(self, hint: TopologyHint) -> bool:
        return hint.preferred
