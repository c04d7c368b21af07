"""The Topology Manager's policies as objects: one per name the kubelet accepts, unknown names refused."""

import pytest

from scheduler_core.errors import PolicyError, RequestError
from scheduler_core.kubelet.topologymanager.hint import TopologyHint
from scheduler_core.kubelet.topologymanager.policies import POLICIES, get_policy
from scheduler_core.kubelet.topologymanager.policy import compare
from scheduler_core.model.kubelet_config import TOPOLOGY_POLICIES


def test_one_policy_per_kubelet_name() -> None:
    assert tuple(POLICIES) == TOPOLOGY_POLICIES
    assert all(get_policy(name).name == name for name in TOPOLOGY_POLICIES)


@pytest.mark.parametrize("name", ["", "Best-Effort", None, 3])
def test_unknown_policy_is_refused(name: object) -> None:
    """With the kubelet's text (NewManager's `unknown policy: "..."`)."""
    with pytest.raises(PolicyError) as refused:
        get_policy(name)
    assert str(refused.value) == f'unknown policy: "{name}"'



def test_single_numa_node_turns_all_nodes_into_nil() -> None:
    policy = get_policy("single-numa-node")
    assert policy.finish(TopologyHint(0b11, True), 0b11) == TopologyHint(None, True)
    assert policy.finish(TopologyHint(0b01, True), 0b11) == TopologyHint(0b01, True)


@pytest.mark.parametrize(("current", "candidate"), [(None, TopologyHint(None, True)),
                                                     (TopologyHint(None, False), TopologyHint(0b01, False))])
def test_comparing_a_nil_mask_is_a_named_error(current: TopologyHint | None, candidate: TopologyHint) -> None:
    """Merged hints always carry a mask; a nil one given to the comparison says so (it used to fail
    with an AttributeError on `None.bit_count()`)."""
    with pytest.raises(RequestError, match="never nil"):
        compare(current, candidate, 1)
