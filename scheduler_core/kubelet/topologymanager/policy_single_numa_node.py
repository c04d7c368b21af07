"""Policy `single-numa-node` (the kubelet's `policy_single_numa_node.go`): only preferred hints on one
NUMA node (or nil) take part, no closest-NUMA tie-break, a result on every node becomes nil, and only a
preferred hint admits the pod."""

from __future__ import annotations

from .hint import TopologyHint
from .policy import filter_single_numa_hints


class SingleNUMANodePolicy:
    name = "single-numa-node"
    merges = True
    uses_closest = False

    def filter(self, lists: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
        return filter_single_numa_hints(lists)

    def finish(self, hint: TopologyHint, default_mask: int) -> TopologyHint:
        return TopologyHint(None, hint.preferred) if hint.affinity == default_mask else hint

    def can_admit(self, hint: TopologyHint) -> bool:
        return hint.preferred
