"""The Topology Manager's policies by name, as the kubelet's `--topology-manager-policy` spells them."""

from __future__ import annotations

from ...errors import PolicyError
from .hint import TopologyHint
from .policy import Policy
from .policy_best_effort import BestEffortPolicy
from .policy_none import NonePolicy
from .policy_restricted import RestrictedPolicy
from .policy_single_numa_node import SingleNUMANodePolicy

POLICIES: dict[str, Policy] = {p.name: p for p in (NonePolicy(), BestEffortPolicy(), RestrictedPolicy(),
                                                   SingleNUMANodePolicy())}


def get_policy(name: object) -> Policy:
    """The policy called `name`; an unknown name raises `PolicyError` with the kubelet's text."""
    policy = POLICIES.get(name) if isinstance(name, str) else None
    if policy is None:
        raise PolicyError(f'unknown policy: "{name}"')
    return policy


def can_admit(policy: str, hint: TopologyHint) -> bool:
    """`CanAdmitPodResult`: none and best-effort always admit; restricted and single-numa-node
    admit only a preferred hint."""
    return get_policy(policy).can_admit(hint)
