"""The kubelet Topology Manager hint merge (ENGINE.md §2.2–§2.4): `TopologyHint`, the three-state
provider output, the policies none / best-effort / restricted / single-numa-node with their options,
and two merges that give the same answer:

* `merge_hints_reference` walks the cross product of the providers' hint lists exactly as upstream
  does (permutation by permutation, `compare` after each). It is the test oracle: short, obviously
  faithful, and exponential (the kubelet caps machines at 8 NUMA nodes because of it).
* `merge_hints` (the public entry point) finds the same hint without the cross product. `compare`
  is a total ranking (ENGINE.md §2.3, order-free formulation), so the result is simply the best merged
  hint that some permutation produces:

  1. Preferred merges are found directly: a permutation is preferred iff every hint in it is
     preferred and all its non-nil masks are equal, so the preferred merged masks are `D & A` for
     every raw mask A that each list offers as `(A, preferred)` or covers with `(nil, preferred)`,
     plus D itself when every list holds `(nil, preferred)`.
  2. Otherwise the set of reachable merged masks {D & x1 & ... & xm} is computed, either by a
     set product while that stays small, or by counting: with F_i(S) = #{x in list i : x ⊇ S}
     (a superset-sum "zeta" transform), the product of the F_i counts the tuples whose AND contains
     S, and the Möbius inversion of that product counts the tuples whose AND *is* S. Both transforms
     run on Python big ints holding one lane per mask (32 bits for a list's sums, 64 bits for the
     products), so they cost a few dozen big-int operations (up to 16 NUMA nodes; beyond that the
     set product is used). The best reachable mask under the non-preferred ranking is then read
     off by count class: count == B, then B-1 down to 1, then B+1 up, ties by the mask comparator.

Masks are ints (bit i = NUMA node i); `None` is the kubelet's nil mask ("any NUMA node").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import PolicyError, TopologyError
from ...model.kubelet_config import TOPOLOGY_OPTIONS, TopologyOptions
from .hint import ProviderHints, TopologyHint, flatten_providers_labeled, format_hint
from .merge_fast import best_merged_hint
from .numa_info import NUMAInfo, narrowest
from .policies import get_policy
from .policy import (
    compare,
    iterate_permutations,
    max_of_min_affinity_counts,
    merge_permutation,
)

# --------------------------------------------------------------------------------------------------
# The merge


@dataclass(frozen=True, slots=True)
class MergeResult:
    """The merged hint and the admit verdict, with what explains them: the flattened hint lists
    (label, hints) as the merge saw them (after single-numa-node filtering), the machine's NUMA nodes
    and BestNonPreferredAffinityCount. Policy none leaves the explanation empty."""

    hint: TopologyHint
    admit: bool
    policy: str = ""
    resource_hints: tuple[tuple[str, tuple[TopologyHint, ...]], ...] = ()
    numa_nodes: tuple[int, ...] = ()
    best_non_preferred: int = 0

    def to_dict(self) -> dict[str, Any]:
        n = len(self.numa_nodes) or None
        return {
            "policy": self.policy,
            "hint": self.hint.to_dict(),
            "hint_text": format_hint(self.hint, n),
            "admit": self.admit,
            "numa_nodes": list(self.numa_nodes),
            "best_non_preferred_affinity_count": self.best_non_preferred,
            "resource_hints": [{"resource": label, "hints": [h.to_dict() for h in hints],
                                "text": " ".join(format_hint(h, n) for h in hints)}
                               for label, hints in self.resource_hints],
        }


def _parse_options(options: object) -> TopologyOptions:
    if options is None or isinstance(options, TopologyOptions):
        return options or TopologyOptions()
    if not isinstance(options, Mapping):
        raise PolicyError(f"Topology Manager policy options must be a mapping name -> value, not {options!r}")
    # The vectors spell option names with underscores; accept those as aliases of the kubelet names.
    named = {}
    for name, value in options.items():
        alias = name.replace("_", "-") if isinstance(name, str) else name
        named[alias if alias in TOPOLOGY_OPTIONS and name not in TOPOLOGY_OPTIONS else name] = value
    return TopologyOptions.parse(named)


#: (lists, NUMA info, use Closest) -> (best hint, BestNonPreferredAffinityCount)
BestFinder = Callable[[list[list[TopologyHint]], NUMAInfo, bool], tuple[TopologyHint, int]]


def _merge(policy: str, providers_hints: Sequence[ProviderHints], numa_nodes: Sequence[int], options: object,
           distances: Mapping[Any, Any] | None, find_best: BestFinder) -> MergeResult:
    pol = get_policy(policy)
    if not pol.merges:
        # The kubelet builds the none scope before parsing options or discovering NUMA nodes.
        return MergeResult(TopologyHint(None, False), True, pol.name)
    opts = _parse_options(options)
    info = NUMAInfo.build(numa_nodes, distances, opts.prefer_closest_numa_nodes)
    if len(info.nodes) > opts.max_allowable_numa_nodes:
        raise TopologyError(f"topology manager policy {policy!r} is unsupported on machines with more than "
                            f"{opts.max_allowable_numa_nodes} NUMA Nodes (this machine has {len(info.nodes)}; "
                            "raise the max-allowable-numa-nodes option)")
    labeled = flatten_providers_labeled(providers_hints)
    raw = [lst for _, lst in labeled]
    lists = pol.filter(raw)
    if lists is not raw:
        labeled = [(label, lst) for (label, _), lst in zip(labeled, lists, strict=True)]
    best, b = find_best(lists, info, opts.prefer_closest_numa_nodes and pol.uses_closest)
    best = pol.finish(best, info.default_mask)
    return MergeResult(best, pol.can_admit(best), pol.name,
                       tuple((label, tuple(lst)) for label, lst in labeled), info.nodes, b)


def _best_reference(lists: list[list[TopologyHint]], info: NUMAInfo, closest: bool) -> tuple[TopologyHint, int]:
    """HintMerger.Merge, literally: every permutation, in upstream order, through `compare`."""
    default = info.default_mask
    winner = info.closest if closest else narrowest
    b = max_of_min_affinity_counts(lists)
    best = None
    for permutation in iterate_permutations(lists):
        best = compare(best, merge_permutation(default, permutation), b, winner)
    return (best if best is not None else TopologyHint(default, False)), b


def merge_hints_reference(policy: str, providers_hints: Sequence[ProviderHints], numa_nodes: Sequence[int],
                          options: Mapping[str, object] | TopologyOptions | None = None,
                          distances: Mapping[int, Sequence[int]] | None = None) -> MergeResult:
    """The Topology Manager merge by the plain cross product (test oracle; exponential)."""
    return _merge(policy, providers_hints, numa_nodes, options, distances, _best_reference)


def merge_hints(policy: str, providers_hints: Sequence[ProviderHints], numa_nodes: Sequence[int],
                options: Mapping[str, object] | TopologyOptions | None = None,
                distances: Mapping[int, Sequence[int]] | None = None) -> MergeResult:
    """`Policy.Merge` of the kubelet Topology Manager (ENGINE.md §2.3), without the cross product.

    `policy`: none | best-effort | restricted | single-numa-node. `providers_hints`: one entry per
    hint provider in registration order (device, CPU, memory), each None, {} or {resource: None |
    [] | [TopologyHint...]} (hints may also be `{"affinity": [ids] | None, "preferred": bool}`).
    `numa_nodes`: the machine's NUMA ids. `options`: kubelet option strings
    (`prefer-closest-numa-nodes`, `max-allowable-numa-nodes`) or a `TopologyOptions`.
    `distances[a]`: the distance row of node a, indexed by NUMA id (needed for prefer-closest).
    Bad input raises `PolicyError` / `TopologyError` / `RequestError` naming the value; a machine with
    more NUMA nodes than `max-allowable-numa-nodes` (default 8) raises the kubelet's error.
    """
    return _merge(policy, providers_hints, numa_nodes, options, distances, best_merged_hint)
