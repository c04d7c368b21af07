"""Every kubelet Topology Manager merge vector (ENGINE.md §2.3), through the fast merge and the
cross-product reference, plus the kubelet's start-up errors for bad policies, options and machines."""

import re
from itertools import permutations, product

import pytest

from scheduler_core.errors import EngineError, PolicyError, RequestError, TopologyError
from scheduler_core.kubelet.topologymanager.hint import TopologyHint, as_hint, flatten_providers, format_hint
from scheduler_core.kubelet.topologymanager.merge import MergeResult, merge_hints, merge_hints_reference
from scheduler_core.kubelet.topologymanager.numa_info import NUMAInfo, average_distance
from scheduler_core.kubelet.topologymanager.policies import can_admit
from scheduler_core.kubelet.topologymanager.policy import compare, filter_single_numa_hints, max_of_min_affinity_counts
from scheduler_core.model.bitmask import BitMaskError, mask_of
from scheduler_core.model.kubelet_config import TopologyOptions
from tests.conftest import load_vectors

DATA = load_vectors("kubelet_merge")
INFOS = DATA["numa_infos"]
CASES = DATA["cases"]
MERGERS = {"fast": merge_hints, "reference": merge_hints_reference}


def _cases(kind: str) -> list[dict]:
    return [c for c in CASES if c["kind"] == kind]


def _ids(cases: list[dict]) -> list[str]:
    return [c["id"] for c in cases]


def _hints(lists: list[list[dict]]) -> list[list[TopologyHint]]:
    return [[as_hint(h) for h in lst] for lst in lists]


def _providers(raw: list) -> list:
    """Vector providers with real TopologyHint objects (None / {} / None-list / [] kept as they are)."""
    out = []
    for provider in raw:
        if provider is None:
            out.append(None)
        else:
            out.append({r: None if hs is None else [as_hint(h) for h in hs] for r, hs in provider.items()})
    return out


def _run_merge(merge, case: dict, providers: list) -> MergeResult:
    info = INFOS[case["numa_info"]]
    return merge(case["policy"], providers, info["nodes"], case.get("options"), info.get("distances"))


def _assert_expected(result: MergeResult, case: dict) -> None:
    assert result.hint.to_dict() == case["expected"]["hint"], case["source"].get("case")
    assert result.admit is case["expected"]["admit"]


@pytest.mark.parametrize("merger", sorted(MERGERS))
@pytest.mark.parametrize("case", _cases("policy_merge"), ids=_ids(_cases("policy_merge")))
def test_policy_merge(case: dict, merger: str) -> None:
    _assert_expected(_run_merge(MERGERS[merger], case, _providers(case["providers"])), case)


@pytest.mark.parametrize("case", _cases("policy_merge"), ids=_ids(_cases("policy_merge")))
def test_policy_merge_with_vector_json_as_is(case: dict) -> None:
    """The entry point also takes the vectors' plain JSON hints and underscore option names."""
    _assert_expected(_run_merge(merge_hints, case, case["providers"]), case)


@pytest.mark.parametrize("case", _cases("policy_merge"), ids=_ids(_cases("policy_merge")))
def test_policy_merge_independent_of_resource_order(case: dict) -> None:
    """Go visits a provider's resources in random map order; every order must give the same hint."""
    providers = _providers(case["providers"])
    orders = [[None] if p is None else [dict(order) for order in permutations(p.items())] for p in providers]
    seen = 0
    for combo in product(*orders):
        for merger in MERGERS.values():
            _assert_expected(_run_merge(merger, case, list(combo)), case)
        seen += 1
    assert seen >= 1


@pytest.mark.parametrize("case", _cases("can_admit"), ids=_ids(_cases("can_admit")))
def test_can_admit(case: dict) -> None:
    assert can_admit(case["policy"], as_hint(case["hint"])) is case["expected"]["admit"]


@pytest.mark.parametrize("case", _cases("compare"), ids=_ids(_cases("compare")))
def test_compare(case: dict) -> None:
    current = None if case["current"] is None else as_hint(case["current"])
    candidate = as_hint(case["candidate"])
    result = compare(current, candidate, case["best_non_preferred_affinity_count"])
    expected = current if case["expected"]["result"] == "current" else candidate
    assert result is expected


@pytest.mark.parametrize("case", _cases("max_of_min_affinity_counts"), ids=_ids(_cases("max_of_min_affinity_counts")))
def test_max_of_min_affinity_counts(case: dict) -> None:
    assert max_of_min_affinity_counts(_hints(case["hints"])) == case["expected"]["result"]


@pytest.mark.parametrize("case", _cases("filter_single_numa_hints"), ids=_ids(_cases("filter_single_numa_hints")))
def test_filter_single_numa_hints(case: dict) -> None:
    assert filter_single_numa_hints(_hints(case["hints"])) == _hints(case["expected"]["result"])


def _distances(raw: dict) -> dict[int, tuple[int, ...]]:
    return {int(k): tuple(v) for k, v in raw.items()}


@pytest.mark.parametrize("case", _cases("closest"), ids=_ids(_cases("closest")))
def test_closest(case: dict) -> None:
    distances = _distances(case["distances"])
    info = NUMAInfo(tuple(sorted(distances)), distances)
    current, candidate = mask_of(case["current"]), mask_of(case["candidate"])
    winner = info.closest(candidate, current)  # upstream argument order
    assert winner == (current if case["expected"]["result"] == "current" else candidate)


@pytest.mark.parametrize("case", _cases("average_distance"), ids=_ids(_cases("average_distance")))
def test_average_distance(case: dict) -> None:
    got = average_distance(_distances(case["distances"]), mask_of(case["mask"]))
    assert got == case["expected"]["result"]  # exact float64 equality


@pytest.mark.parametrize("case", _cases("numa_info"), ids=_ids(_cases("numa_info")))
def test_numa_info(case: dict) -> None:
    nodes = [n["id"] for n in case["topology_nodes"]]
    distances = {n["id"]: n["distances"] for n in case["topology_nodes"] if n.get("distances") is not None}
    prefer = case["prefer_closest_numa_nodes"]
    if "error" in case["expected"]:
        with pytest.raises(TopologyError, match=re.escape(case["expected"]["error"])):
            NUMAInfo.build(nodes, distances, prefer)
        return
    info = NUMAInfo.build(nodes, distances, prefer)
    assert list(info.nodes) == case["expected"]["nodes"]
    assert info.to_dict()["distances"] == case["expected"]["distances"]


def test_every_kind_is_exercised() -> None:
    kinds = set(DATA["schema"]["kinds"])
    assert {c["kind"] for c in CASES} <= kinds
    tested = {"policy_merge", "can_admit", "compare", "max_of_min_affinity_counts", "filter_single_numa_hints",
              "closest", "average_distance", "numa_info"}
    assert kinds <= tested


# --------------------------------------------------------------------------------------------------
# Worked micro-examples of ENGINE.md §2.3 and §2.4 spelled out


def test_zero_providers_is_default_preferred_and_empty_list_is_default_not_preferred() -> None:
    four = [0, 1, 2, 3]
    assert merge_hints("best-effort", [], four).hint == TopologyHint(0b1111, True)
    assert merge_hints("best-effort", [{"r": []}], four).hint == TopologyHint(0b1111, False)
    assert merge_hints("best-effort", [{"r": None}], four).hint == TopologyHint(0b1111, True)
    assert merge_hints("best-effort", [None, {}], four).hint == TopologyHint(0b1111, True)


@pytest.mark.parametrize("budget", [None, 0, 1 << 60])
def test_machine_without_numa_nodes(budget, monkeypatch) -> None:
    """D = 0: every merge is empty and skipped, so the result is (0, NP) -- also with no providers."""
    import scheduler_core.kubelet.topologymanager.merge_fast as hints_module

    monkeypatch.setattr(hints_module, "SET_PRODUCT_BUDGET", budget)
    cases = [[], [{"a": [TopologyHint(1, True), TopologyHint(None, False)]}, {"b": [TopologyHint(3, False)]}],
             [{"a": [TopologyHint(None, True)]}], [{"a": []}]]
    for providers in cases:
        for policy in ("best-effort", "restricted", "single-numa-node"):
            fast, slow = merge_hints(policy, providers, []), merge_hints_reference(policy, providers, [])
            assert fast == slow
            assert fast.hint.preferred is False
            assert fast.hint.affinity == (None if policy == "single-numa-node" else 0)


def test_single_numa_machine_aligned_hint_becomes_nil() -> None:
    result = merge_hints("single-numa-node", [{"cpu": [TopologyHint(1, True)]}], [0])
    assert result.hint == TopologyHint(None, True)
    assert result.admit is True


def test_none_policy_ignores_hints_options_and_machine_size() -> None:
    result = merge_hints("none", [{"cpu": []}], list(range(20)), {"bogus": "x"})
    assert result.hint == TopologyHint(None, False)
    assert result.admit is True


def test_flatten_three_states() -> None:
    lists = flatten_providers([None, {}, {"a": None, "b": [], "c": [TopologyHint(1, True)]}])
    assert lists == [[TopologyHint(None, True)], [TopologyHint(None, True)], [TopologyHint(None, True)],
                     [TopologyHint(None, False)], [TopologyHint(1, True)]]


def test_merge_result_explains_each_resource() -> None:
    providers = [{"gpu": [TopologyHint(0b10, True)]}, {"cpu": [TopologyHint(0b01, True), TopologyHint(0b11, False)]}]
    result = merge_hints("restricted", providers, [0, 1])
    assert result.hint == TopologyHint(0b10, False)  # {10}P AND {11}NP: masks differ → not preferred
    assert result.admit is False
    assert [label for label, _ in result.resource_hints] == ["gpu", "cpu"]
    data = result.to_dict()
    assert data["hint_text"] == "{10: F}"
    assert data["resource_hints"][1]["text"] == "{01: T} {11: F}"
    assert data["best_non_preferred_affinity_count"] == 1


def test_hint_formatting_and_round_trip() -> None:
    assert str(TopologyHint(0b01, True)) == "{01: T}"
    assert str(TopologyHint(0b11, False)) == "{11: F}"
    assert str(TopologyHint(None, True)) == "{any: T}"
    assert format_hint(TopologyHint(0b0011, True), 4) == "{0011: T}"
    assert format_hint(TopologyHint(0b0111, False), 4) == "{0111: F}"
    hint = TopologyHint(0b1010, False)
    assert hint.to_dict() == {"affinity": [1, 3], "preferred": False}
    assert TopologyHint.from_dict(hint.to_dict()) == hint


def test_options_object_and_kubelet_strings_agree() -> None:
    providers = [{"r1": [TopologyHint(0b1111, False), TopologyHint(0b0011, False)]},
                 {"r2": [TopologyHint(0b0110, False), TopologyHint(0b1100, False)]}]
    eight = INFOS["eight"]
    distances = {int(k): v for k, v in eight["distances"].items()}
    by_string = merge_hints("best-effort", providers, eight["nodes"], {"prefer-closest-numa-nodes": "true"}, distances)
    by_object = merge_hints("best-effort", providers, eight["nodes"], TopologyOptions(True), distances)
    narrow = merge_hints("best-effort", providers, eight["nodes"], {"prefer-closest-numa-nodes": "false"})
    assert by_string.hint == by_object.hint == TopologyHint(0b1100, False)
    assert narrow.hint == TopologyHint(0b0110, False)


# --------------------------------------------------------------------------------------------------
# Bad input: the kubelet's errors, naming the offending value


@pytest.mark.parametrize("merger", sorted(MERGERS))
def test_unknown_policy(merger: str) -> None:
    with pytest.raises(PolicyError, match='unknown policy: "spread-evenly"'):
        MERGERS[merger]("spread-evenly", [], [0, 1])
    with pytest.raises(PolicyError, match='unknown policy: "spread-evenly"'):
        can_admit("spread-evenly", TopologyHint(None, True))


def test_unknown_option() -> None:
    with pytest.raises(PolicyError, match='unknown Topology Manager Policy option: "prefer-widest"'):
        merge_hints("best-effort", [], [0, 1], {"prefer-widest": "true"})


def test_bad_option_values() -> None:
    with pytest.raises(PolicyError, match=r'bad value for option "prefer-closest-numa-nodes".*maybe'):
        merge_hints("restricted", [], [0, 1], {"prefer-closest-numa-nodes": "maybe"})
    with pytest.raises(PolicyError, match=r"max-allowable-numa-nodes.*'lots'"):
        merge_hints("restricted", [], [0, 1], {"max-allowable-numa-nodes": "lots"})
    with pytest.raises(PolicyError, match='minimum value of "max-allowable-numa-nodes" should not be less than 8'):
        merge_hints("restricted", [], [0, 1], {"max-allowable-numa-nodes": "4"})
    with pytest.raises(PolicyError, match="options must be a mapping"):
        merge_hints("restricted", [], [0, 1], ["prefer-closest-numa-nodes"])


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_too_many_numa_nodes_for_every_non_none_policy(policy: str) -> None:
    nodes = list(range(9))
    with pytest.raises(TopologyError, match=r"unsupported on machines with more than 8 NUMA Nodes.*has 9"):
        merge_hints(policy, [], nodes)
    with pytest.raises(TopologyError, match=r"more than 12 NUMA Nodes.*has 13"):
        merge_hints(policy, [], list(range(13)), {"max-allowable-numa-nodes": "12"})
    assert merge_hints(policy, [], nodes, {"max-allowable-numa-nodes": "9"}).admit is True


def test_prefer_closest_needs_distances_for_every_node() -> None:
    with pytest.raises(TopologyError, match=r"error getting NUMA distances from cadvisor.*node 1"):
        merge_hints("best-effort", [], [0, 1], {"prefer-closest-numa-nodes": "true"}, {0: [10, 11]})
    with pytest.raises(TopologyError, match="distance row of NUMA node 0 has 1 values"):
        merge_hints("best-effort", [], [0, 1], {"prefer-closest-numa-nodes": "true"}, {0: [10], 1: [11, 10]})
    with pytest.raises(TopologyError, match="distance 'far' from NUMA node 0"):
        merge_hints("best-effort", [], [0, 1], {"prefer-closest-numa-nodes": "true"}, {0: [10, "far"], 1: [11, 10]})
    # Without the option the kubelet never reads distances.
    assert merge_hints("best-effort", [], [0, 1]).hint == TopologyHint(0b11, True)


def test_bad_numa_nodes_and_hints() -> None:
    with pytest.raises(TopologyError, match="NUMA node 1 is listed twice"):
        merge_hints("best-effort", [], [0, 1, 1])
    with pytest.raises(TopologyError, match="NUMA node id 64"):
        merge_hints("best-effort", [], [0, 64])
    with pytest.raises(BitMaskError, match=r"\[0, 70\]"):
        merge_hints("best-effort", [{"cpu": [{"affinity": [0, 70], "preferred": True}]}], [0, 1])
    with pytest.raises(RequestError, match="'yes'"):
        merge_hints("best-effort", [{"cpu": [{"affinity": [0], "preferred": "yes"}]}], [0, 1])
    with pytest.raises(RequestError, match="provider 0 must return a mapping"):
        merge_hints("best-effort", [["cpu"]], [0, 1])
    with pytest.raises(BitMaskError, match="-1"):
        TopologyHint(-1, True)
    with pytest.raises(EngineError):
        TopologyHint(1, 1)
