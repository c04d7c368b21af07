"""Side-by-side answers: a variant (profile + kubelet overrides) run over a cluster snapshot, the
metrics that tell variants apart, the free single-NUMA blocks a placement leaves, and headroom for
a pod shape. Every figure is computed from the engine's own inputs and results; nothing is estimated.

- `Variant.from_dict({"profile": "aligned", "topology_manager_policy": ..., "topology_manager_scope":
  ..., "cpu_manager_options": {...}, "weight": 1, "distance_tie_break": false, "strategy": null, "numa_strategy":
  null, "cpu_bind_policy": null, "ignore_list": null})`: a profile, its own settings (those upstream operators set
  for the plugin it models) and the overrides applied to *every* node's kubelet settings (`Variant.apply(nodes)`
  returns new nodes; the given ones are untouched).
- `Shape` and `headroom` (for a pod shape, on what a placement leaves): see `headroom.py`, whose names this
  module exports too.
- `run_variant(nodes, jobs, variant, shape=None)` → `{"metrics", "nodes"}`; `metrics(result,
  cluster)` for a finished session (see `metrics` for the keys).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NotRequired, TypedDict

from ..dra.model import DraState
from ..errors import PolicyError, RequestError
from ..model.jobs import Job
from ..model.kubelet_config import TOPOLOGY_POLICIES, TOPOLOGY_SCOPES, CPUOptions, KubeletConfig
from ..model.node import Node
from ..nrt.score import STRATEGIES
from ..volcano.numaaware import reason_policy_mismatch
from .cluster import Cluster
from .explain import PodStatus, SessionResult
from .headroom import HeadroomSummary, Shape, headroom
from .plugin_profiles import CPU_BIND_POLICIES, KOORDINATOR_STRATEGIES
from .profiles import PROFILES, AlignedProfile, KaiProfile, KoordinatorProfile, NRTProfile, Profile, get_profile
from .session import run_session

#: single-NUMA block histogram bins: (label, smallest, largest) free CPUs on one NUMA node
BLOCK_BINS: tuple[tuple[str, int, int], ...] = (
    ("0", 0, 0), ("1", 1, 1), ("2-3", 2, 3), ("4-7", 4, 7), ("8-15", 8, 15), ("16-31", 16, 31),
    ("32-63", 32, 63), ("64+", 64, 1 << 62),
)


class VariantDict(TypedDict):
    profile: str
    topology_manager_policy: str | None
    topology_manager_scope: str | None
    cpu_manager_options: dict[str, str] | None
    weight: int
    distance_tie_break: bool
    strategy: str | None
    numa_strategy: str | None
    cpu_bind_policy: str | None
    ignore_list: list[str] | None


class NodeRow(TypedDict):
    node: str
    numa: list[list[int]]
    largest_block: int
    headroom: NotRequired[int]  # run_variant with a shape


class Metrics(TypedDict):
    pods: int
    pods_placed: int
    pods_unplaced: int
    pods_admitted: int
    pods_rejected: int
    jobs: int
    jobs_committed: int
    jobs_rolled_back: int
    topology_affinity_errors: int
    admission_errors: int
    admission_errors_by_reason: dict[str, int]
    pods_unplaced_policy_filter: int
    policy_nodes: dict[str, int]
    pods_multi_numa: int
    mean_numa_distance: float | None
    cpu_prediction_mismatches: int
    free_cpus: int
    free_single_numa_blocks: int
    block_histogram: dict[str, int]
    engine_s: float
    headroom: NotRequired[int]  # run_variant with a shape: placed by the scheduler, refused ones included
    headroom_admitted: NotRequired[int]  # ... of which the kubelet admits
    headroom_rejected: NotRequired[int]  # ... and refuses
    pods_with_claims: NotRequired[int]  # run_variant with DRA objects: admitted pods whose claims got devices
    pods_misaligned: NotRequired[int]  # ... whose devices are not on their CPUs' and memory's NUMA nodes
    misaligned_kinds: NotRequired[dict[str, int]]  # ... per kind (gpu-cpu, nic-gpu, ...)


class VariantResult(TypedDict):
    variant: VariantDict
    metrics: Metrics
    nodes: list[NodeRow]
    headroom: HeadroomSummary | None


# ------------------------------------------------------------------------------------------------
# Variants
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """A scheduler profile with its own settings, plus optional overrides of every node's kubelet settings
    (None: keep each node's own). `weight` is the profile's plugin weight (volcano, nrt); `distance_tie_break`
    (aligned only) prefers, among equally narrow placements, the lowest mean NUMA distance; `strategy` is the
    scoring strategy of nrt (NodeResourceTopologyMatch) or koordinator (NodeNUMAResource's ScoringStrategy);
    koordinator's `numa_strategy` (NUMAScoringStrategy) and `cpu_bind_policy` (DefaultCPUBindPolicy); kai's
    `ignore_list` (resources its numa plugin does not align), kept sorted. None: upstream's default. A setting
    given for a profile without it is refused, so a comparison never shows a setting that changed nothing."""

    profile: str
    topology_manager_policy: str | None = None
    topology_manager_scope: str | None = None
    cpu_manager_options: CPUOptions | None = None
    weight: int = 1
    distance_tie_break: bool = False
    strategy: str | None = None
    numa_strategy: str | None = None
    cpu_bind_policy: str | None = None
    ignore_list: tuple[str, ...] | None = None

    FIELDS = ("profile", "topology_manager_policy", "topology_manager_scope", "cpu_manager_options", "weight",
              "distance_tie_break", "strategy", "numa_strategy", "cpu_bind_policy", "ignore_list")

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise PolicyError(f"profile: unknown scheduler profile {self.profile!r}; expected one of: "
                              f"{', '.join(PROFILES)}")
        if self.topology_manager_policy is not None and self.topology_manager_policy not in TOPOLOGY_POLICIES:
            raise PolicyError(f"topology_manager_policy: unknown Topology Manager policy "
                              f"{self.topology_manager_policy!r}; expected one of: {', '.join(TOPOLOGY_POLICIES)}")
        if self.topology_manager_scope is not None and self.topology_manager_scope not in TOPOLOGY_SCOPES:
            raise PolicyError(f"topology_manager_scope: unknown Topology Manager scope "
                              f"{self.topology_manager_scope!r}; expected one of: {', '.join(TOPOLOGY_SCOPES)}")
        if self.cpu_manager_options is not None and not isinstance(self.cpu_manager_options, CPUOptions):
            try:
                options = CPUOptions.parse(self.cpu_manager_options)
            except PolicyError as exc:
                raise PolicyError(f"cpu_manager_options: {exc}") from None
            object.__setattr__(self, "cpu_manager_options", options)
        if isinstance(self.weight, bool) or not isinstance(self.weight, int) or not 0 <= self.weight <= 100:
            raise RequestError(f"weight: the plugin weight must be an integer from 0 to 100, not {self.weight!r}")
        if not isinstance(self.distance_tie_break, bool):
            raise RequestError(f"distance_tie_break: must be true or false, not {self.distance_tie_break!r}")
        if self.distance_tie_break and self.profile != "aligned":
            raise PolicyError("distance_tie_break: only the aligned profile has a distance-aware tie-break")
        if self.strategy is not None:
            if self.profile not in (NRTProfile.name, KoordinatorProfile.name):
                raise PolicyError("strategy: only the nrt and koordinator profiles have a scoring strategy")
            if self.profile == NRTProfile.name:
                _choose("strategy", "scoring strategy", self.strategy, STRATEGIES)
            else:
                _choose("strategy", "Koordinator scoring strategy", self.strategy, KOORDINATOR_STRATEGIES)
        for field, what, known in (("numa_strategy", "NUMA scoring strategy", KOORDINATOR_STRATEGIES),
                                   ("cpu_bind_policy", "default CPU bind policy", CPU_BIND_POLICIES)):
            value = getattr(self, field)
            if value is not None:
                if self.profile != KoordinatorProfile.name:
                    raise PolicyError(f"{field}: only the koordinator profile has a {what}")
                _choose(field, f"Koordinator {what}", value, known)
        if self.ignore_list is not None:
            names = self.ignore_list
            if not isinstance(names, list | tuple | set | frozenset) \
                    or not all(isinstance(n, str) and n.strip() for n in names):
                raise RequestError(f"ignore_list: a list of resource names (non-empty strings), not {names!r}")
            object.__setattr__(self, "ignore_list", tuple(sorted({n.strip() for n in names})) or None)
            if self.ignore_list is not None and self.profile != KaiProfile.name:
                raise PolicyError("ignore_list: only the kai profile has an ignore list")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Variant:
        """A variant from JSON-like data (any values: `__post_init__` checks each field); unknown keys
        and bad values raise naming the field."""
        if not isinstance(data, Mapping):
            raise RequestError(f"a variant is an object with a profile, not {data!r}")
        unknown = sorted(set(data) - set(cls.FIELDS))
        if unknown:
            raise RequestError(f"{unknown[0]}: unknown variant field; expected: {', '.join(cls.FIELDS)}")
        if "profile" not in data:
            raise RequestError("profile: every variant needs a profile")
        options = data.get("cpu_manager_options")
        if options is not None and not isinstance(options, Mapping):
            raise RequestError(f"cpu_manager_options: must map option names to values, not {options!r}")
        values = {k: v for k, v in data.items() if v not in (None, "")}
        return cls(**values)

    def to_dict(self) -> VariantDict:
        return {"profile": self.profile, "topology_manager_policy": self.topology_manager_policy,
                "topology_manager_scope": self.topology_manager_scope,
                "cpu_manager_options": None if self.cpu_manager_options is None else self.cpu_manager_options.to_dict(),
                "weight": self.weight, "distance_tie_break": self.distance_tie_break, "strategy": self.strategy,
                "numa_strategy": self.numa_strategy, "cpu_bind_policy": self.cpu_bind_policy,
                "ignore_list": None if self.ignore_list is None else list(self.ignore_list)}

    @property
    def label(self) -> str:
        """Short human name: `aligned · single-numa-node/pod · full-pcpus-only`, `koordinator · MostAllocated ·
        NUMA MostAllocated · SpreadByPCPUs`, `kai · ignoring nvidia.com/gpu`."""
        parts = [self.profile]
        policy = "/".join(p for p in (self.topology_manager_policy, self.topology_manager_scope) if p)
        if policy:
            parts.append(policy)
        if self.cpu_manager_options is not None:
            parts.append(",".join(self.cpu_manager_options.to_dict()) or "no cpu options")
        if self.weight != 1:
            parts.append(f"weight {self.weight}")
        if self.distance_tie_break:
            parts.append("closest")
        if self.strategy is not None:
            parts.append(self.strategy)
        if self.numa_strategy is not None:
            parts.append(f"NUMA {self.numa_strategy}")
        if self.cpu_bind_policy is not None:
            parts.append(self.cpu_bind_policy)
        if self.ignore_list is not None:
            parts.append(f"ignoring {','.join(self.ignore_list)}")
        return " · ".join(parts)

    @property
    def overrides_kubelet(self) -> bool:
        return (self.topology_manager_policy, self.topology_manager_scope, self.cpu_manager_options) != (None,) * 3

    def engine_profile(self) -> Profile:
        """The engine's profile object with this variant's options."""
        if self.profile == "aligned":
            return AlignedProfile(weight=self.weight, distance_tie_break=self.distance_tie_break)
        if self.profile == NRTProfile.name and self.strategy is not None:
            return NRTProfile(weight=self.weight, strategy=self.strategy)
        if self.profile == KoordinatorProfile.name:
            given = {"scoring_strategy": self.strategy, "numa_scoring_strategy": self.numa_strategy,
                     "default_cpu_bind_policy": self.cpu_bind_policy}
            return KoordinatorProfile(weight=self.weight, **{k: v for k, v in given.items() if v is not None})
        if self.profile == KaiProfile.name and self.ignore_list is not None:
            return KaiProfile(weight=self.weight, ignore_list=frozenset(self.ignore_list))
        return get_profile(self.profile, self.weight)

    def kubelet(self, config: KubeletConfig) -> KubeletConfig:
        """`config` with this variant's overrides, checked as the kubelet checks its settings at
        start-up (e.g. align-by-socket with single-numa-node raises)."""
        if not self.overrides_kubelet:
            return config
        policy, scope, options = self.topology_manager_policy, self.topology_manager_scope, self.cpu_manager_options
        return replace(config, topology_manager_policy=config.topology_manager_policy if policy is None else policy,
                       topology_manager_scope=config.topology_manager_scope if scope is None else scope,
                       cpu_manager_options=config.cpu_manager_options if options is None else options)

    def apply(self, nodes: Iterable[Node]) -> list[Node]:
        """The nodes with this variant's kubelet overrides (new Node objects; the inputs are unchanged).
        A setting a node cannot take raises naming the node."""
        if not self.overrides_kubelet:
            return [node.copy() for node in nodes]
        configs: dict[KubeletConfig, KubeletConfig] = {}
        out = []
        for node in nodes:
            kubelet = configs.get(node.kubelet)
            if kubelet is None:
                try:
                    kubelet = configs[node.kubelet] = self.kubelet(node.kubelet)
                except PolicyError as exc:
                    raise PolicyError(f"node {node.name}: {exc}") from None
            out.append(Node(node.name, node.topology, kubelet, node.allocations, node.numatopology, node.labels))
        return out


def _choose(field: str, what: str, value: object, known: Sequence[str]) -> None:
    """PolicyError naming `field` unless `value` is one of `known`."""
    if value not in known:
        raise PolicyError(f"{field}: unknown {what} {value!r}; expected one of: {', '.join(known)}")



# ------------------------------------------------------------------------------------------------
# Metrics
# ------------------------------------------------------------------------------------------------


def numa_use(node: Node) -> list[list[int]]:
    """Per NUMA node (in id order): [free CPUs, CPUs the CPU Manager may hand out (all − reserved)]."""
    reserved = node.reserved_cpus.mask
    free = node.free_cpus
    return [[(m & free).bit_count(), (m & ~reserved).bit_count()]
            for _n, m in sorted(node.topology.numa_cpus.items())]


def block_histogram(nodes: Iterable[Sequence[Sequence[int]]]) -> dict[str, int]:
    """Single-NUMA free blocks (one per NUMA node: its free CPUs) counted per size bin (`BLOCK_BINS`)."""
    hist = {label: 0 for label, _lo, _hi in BLOCK_BINS}
    for numa in nodes:
        for free, _capacity in numa:
            for label, lo, hi in BLOCK_BINS:
                if lo <= free <= hi:
                    hist[label] += 1
                    break
    return hist


SPAN_BINS = ("1", "2", "3", "4+", "shared pool", "not admitted")


def span_histogram(masks: Iterable[int | None]) -> dict[str, int]:
    """Pods by the number of NUMA nodes their CPUs, memory and devices sit on, from each pod's admitted
    NUMA mask (None: the kubelet did not admit it, or the scheduler did not place it; 0: admitted
    without NUMA-local resources: "shared pool", e.g. a Burstable pod on the shared CPUs)."""
    hist = dict.fromkeys(SPAN_BINS, 0)
    for mask in masks:
        if mask is None:
            hist["not admitted"] += 1
        elif not mask:
            hist["shared pool"] += 1
        else:
            spans = mask.bit_count()
            hist["4+" if spans >= 4 else str(spans)] += 1
    return hist


def node_table(cluster: Cluster) -> list[NodeRow]:
    """Per node after placement: NUMA use and its largest single-NUMA free block."""
    out: list[NodeRow] = []
    for name in sorted(cluster.nodes):
        numa = numa_use(cluster.nodes[name])
        out.append({"node": name, "numa": numa, "largest_block": max((f for f, _c in numa), default=0)})
    return out


#: the middle of Volcano's "task topology policy[x] is different with node[y]": an unplaced pod's FitErrors message
#: holding it was turned away by some node for its policy alone
_POLICY_MISMATCH = reason_policy_mismatch("\0", "\0").split("\0")[1]


def policy_nodes(nodes: Iterable[Node]) -> dict[str, int]:
    """Nodes by the Topology Manager policy Volcano's numa-aware filter compares a task's policy with (static CPU
    Manager nodes only: on the others a task with a policy never passes)."""
    out: dict[str, int] = {}
    for node in nodes:
        if node.kubelet.cpu_manager_policy == "static":
            policy = node.kubelet.topology_manager_policy
            out[policy] = out.get(policy, 0) + 1
    return dict(sorted(out.items()))


def metrics(result: SessionResult, cluster: Cluster, nodes: list[NodeRow] | None = None) -> Metrics:
    """The figures that tell variants apart, from a finished session and the cluster it left:

    pods / pods_placed / pods_unplaced / pods_admitted; pods_rejected (placed by the scheduler, refused by the
    kubelet) and admission_errors_by_reason (those by the kubelet's reason, e.g. SMTAlignmentError);
    jobs_committed and jobs_rolled_back (gangs whose minAvailable was not met, their placements undone);
    topology_affinity_errors and the other admission_errors; pods_unplaced_policy_filter (unplaced pods some node
    turned away because its Topology Manager policy is not the task's: Volcano's filter); policy_nodes (see
    `policy_nodes`); pods_multi_numa (admitted pods
    whose CPUs, memory or devices span more than one NUMA node); mean_numa_distance over admitted
    pods that hold NUMA-local resources (None when none do or no machine reports distances);
    cpu_prediction_mismatches; free_cpus, free_single_numa_blocks (NUMA nodes with free CPUs) and
    block_histogram; engine_s (the session's own time)."""
    counts = result.counts
    spans = distances = policy_filtered = 0
    total_distance = 0.0
    reasons: dict[str, int] = {}
    for record in result.pods:
        if record.status == PodStatus.REJECTED:
            reason = record.kubelet_reason or "unknown"
            reasons[reason] = reasons.get(reason, 0) + 1
        elif not record.placed and record.message and _POLICY_MISMATCH in record.message:
            policy_filtered += 1
        mask = record.admitted_numa or 0
        if record.status != PodStatus.ADMITTED or not mask or record.node is None:  # admitted: it has a node
            continue
        if mask.bit_count() > 1:
            spans += 1
        d = cluster.nodes[record.node].topology.mean_distance(mask)
        if d is not None:
            distances += 1
            total_distance += d
    nodes = node_table(cluster) if nodes is None else nodes
    committed = sum(1 for j in result.jobs if j["committed"])
    return {
        "pods": counts["pods"], "pods_placed": counts["placed"], "pods_unplaced": counts["unplaced"],
        "pods_admitted": counts["admitted"],
        "pods_rejected": counts["topology_affinity_errors"] + counts["admission_errors"], "jobs": len(result.jobs),
        "jobs_committed": committed, "jobs_rolled_back": len(result.jobs) - committed,
        "topology_affinity_errors": counts["topology_affinity_errors"],
        "admission_errors": counts["admission_errors"], "admission_errors_by_reason": dict(sorted(reasons.items())),
        "pods_unplaced_policy_filter": policy_filtered, "policy_nodes": policy_nodes(cluster.nodes.values()),
        "pods_multi_numa": spans,
        "mean_numa_distance": round(total_distance / distances, 3) if distances else None,
        "cpu_prediction_mismatches": counts["cpu_prediction_mismatches"],
        "free_cpus": sum(f for n in nodes for f, _c in n["numa"]),
        "free_single_numa_blocks": sum(1 for n in nodes for f, _c in n["numa"] if f),
        "block_histogram": block_histogram(n["numa"] for n in nodes),
        "engine_s": round(result.timings["total_s"], 4),
    }


def dra_metrics(result: SessionResult) -> tuple[int, int, dict[str, int]]:
    """Admitted pods whose claims got devices, those misaligned, and the misaligned pods per kind."""
    claimed = misaligned = 0
    kinds: dict[str, int] = {}
    for record in result.pods:
        if record.dra is None:
            continue
        claimed += 1
        alignment = record.dra["alignment"]
        if not alignment["aligned"]:
            misaligned += 1
            for kind in alignment["kinds"]:
                kinds[kind] = kinds.get(kind, 0) + 1
    return claimed, misaligned, dict(sorted(kinds.items()))


def run_variant(nodes: Iterable[Node], jobs: Sequence[Job], variant: Variant, shape: Shape | None = None,
                progress: Callable[[int, int], None] | None = None, headroom_pods: int | None = None,
                headroom_seconds: float | None = None, dra: DraState | None = None) -> VariantResult:
    """One variant as a dry run over `nodes` (left unchanged): `{"variant", "metrics", "nodes",
    "headroom"}`; `headroom` (for `shape`, on what the variant's placement leaves, with its profile)
    is None without a shape, and its total is also `metrics["headroom"]`; `headroom_pods` and `headroom_seconds`
    bound it as `headroom`'s `max_pods` and `seconds` do. With `dra`, pods' claims are allocated (ENGINE.md §8.5)
    and the metrics count the pods with claims and the misaligned ones, per kind."""
    cluster = Cluster(variant.apply(nodes))
    profile = variant.engine_profile()
    result = run_session(cluster, jobs, profile=profile, progress=progress, explain_names=0, explain_groups=0,
                         dra=dra)
    table = node_table(cluster)
    out: VariantResult = {"variant": variant.to_dict(), "metrics": metrics(result, cluster, table), "nodes": table,
                          "headroom": None}
    if dra is not None:
        claimed, misaligned, kinds = dra_metrics(result)
        out["metrics"]["pods_with_claims"] = claimed
        out["metrics"]["pods_misaligned"] = misaligned
        out["metrics"]["misaligned_kinds"] = kinds
    if shape is not None:
        room = headroom(cluster, shape, profile, max_pods=headroom_pods, seconds=headroom_seconds)
        counts = {n["node"]: n["count"] for n in room["nodes"]}
        for row in table:
            row["headroom"] = counts[row["node"]]
        out["headroom"] = {
            "profile": room["profile"], "shape": room["shape"], "total": room["total"], "rejected": room["rejected"],
            "at_least": room["at_least"], "stopped": room["stopped"], "bound": room["bound"],
            "sessions": room["sessions"], "engine_s": room["engine_s"]}
        out["metrics"]["headroom"] = room["total"]
        out["metrics"]["headroom_admitted"] = room["total"] - room["rejected"]
        out["metrics"]["headroom_rejected"] = room["rejected"]
    return out


#: STRATEGIES: the nrt variant's scoring strategies, for the pages and the API that offer them
__all__ = ["BLOCK_BINS", "CPU_BIND_POLICIES", "KOORDINATOR_STRATEGIES", "SPAN_BINS", "STRATEGIES", "Shape", "Variant",
           "block_histogram", "dra_metrics", "headroom", "metrics",
           "node_table", "numa_use", "policy_nodes", "run_variant", "span_histogram"]
