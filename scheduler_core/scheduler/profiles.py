"""Scheduler profiles (ENGINE.md §4.2): how a session judges one pod on one node, scores the nodes that
pass, and what placing (or rolling back) a pod changes in the profile's own view of the cluster (the hooks:
`profile.ProfileSession`).

- `volcano`: Volcano's numa-aware plugin as upstream decides, driven through `volcano.VolcanoPlugin`:
  task policy must equal the node's, CPU only, per container, init containers ignored, legacy merge,
  NUMA-span score × `weight` (none when the task has no policy); allocate events keep the plugin's
  in-session free-CPU view, and its close hand-off becomes `SessionResult.volcano_close`.
- `aligned`: the kubelet's own admission run as the predicate on the node's current state (node
  scope, CPU + memory + hugepages + devices, init containers, modern merge and options); the score
  is the same NUMA-span normalisation over the predicted allocation (weight 1).
- `unaware`: resource fit only, no score (the default kube-scheduler's view of NUMA: none).
- other schedulers' NUMA plugins (`nrt`, `kai`, `koordinator`): `plugin_profiles`.

`PROFILES` maps each name to its class, in the order pages list them; `get_profile(name)` builds one.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, cast

from ..errors import PolicyError
from ..kubelet.admission import AdmitResult
from ..model.pods import Pod
from ..volcano.cache import NumaCache
from ..volcano.cpumanager.provider import NumaModel
from ..volcano.numaaware import (
    PASS_ASSIGNED,
    PASS_NOT_GUARANTEED,
    PASS_SKIPPED,
    REJECT,
    UNSCHEDULABLE_AND_UNRESOLVABLE,
    CloseEntry,
    VolcanoPlugin,
    VolcanoTask,
    normalize_scores,
)
from .admissions import Admissions, kubelet_reading, kubelet_state
from .cluster import Cluster
from .explain import FILTERED, PASSED, SKIPPED, UNSCHEDULABLE, NodeVerdict
from .plugin_profiles import KaiProfile, KoordinatorProfile, NRTProfile
from .profile import Profile, ProfileSession

__all__ = ["PROFILES", "AlignedProfile", "KaiProfile", "KoordinatorProfile", "NRTProfile", "Profile", "ProfileSession",
           "UnawareProfile", "VolcanoProfile", "get_profile"]


# -- volcano ---------------------------------------------------------------------------------------------


class _VolcanoSession(ProfileSession):
    """Drives one `VolcanoPlugin` over the cluster: predicate on a class's first node, scores from the
    verdicts' NUMA counts, allocate on place, deallocate on rollback, the plugin's close at the end.
    The `prepared` the session hands back is what `prepare` returned: a `VolcanoTask`."""

    def __init__(self, cluster: Cluster, weight: int, cache: NumaCache | None) -> None:
        models: dict[int, NumaModel | None] = {}
        nodes = {}
        for name, node in cluster.nodes.items():
            static_id = cluster.static_id(name)
            if static_id not in models:
                models[static_id] = NumaModel.from_node(node) if node.numatopology else None
            model = models[static_id]
            # the exporter's allocatable: every CPU the kubelet has not pinned (reserved ones included)
            free: int | None = node.free_cpus | node.reserved_cpus.mask
            if cache is not None and name in cache.nodes:
                view = cache.refresh(name)  # the CRD's view minus the pods Volcano placed and nobody pinned yet
                if view is None:
                    model = None
                else:
                    free = view.numares["cpu"][0] if "cpu" in view.numares else None
            nodes[name] = (model, free)
        self.plugin = VolcanoPlugin(nodes, weight)
        self.cache = cache

    def state_key(self, name: str) -> Hashable:
        return self.plugin.free[name]

    def prepare(self, pod: Pod) -> VolcanoTask:
        return VolcanoTask.from_pod(pod)

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        v = self.plugin.simulate(cast(VolcanoTask, prepared), name)
        if v.outcome == REJECT:
            outcome = UNSCHEDULABLE if v.code == UNSCHEDULABLE_AND_UNRESOLVABLE else FILTERED
            return NodeVerdict(outcome, reason=v.reason, code=v.code, volcano=v)
        if v.outcome in (PASS_NOT_GUARANTEED, PASS_SKIPPED):
            return NodeVerdict(SKIPPED, volcano=v)
        return NodeVerdict(PASSED, volcano=v, numa_count=v.numa_count, numa_mask=v.numa_mask,
                           cpus=v.assignment or 0)

    def scores(self, prepared: object, verdicts: Sequence[NodeVerdict]) -> list[int] | None:
        # batchNodeOrderFn runs only for a task with an assignment somewhere this session
        if not any(v.volcano is not None and v.volcano.outcome == PASS_ASSIGNED for v in verdicts):
            return None
        return self.plugin.scores(cast(VolcanoTask, prepared), [v.numa_count for v in verdicts])

    def on_place(self, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        v = verdict.volcano
        if v is not None and v.outcome == PASS_ASSIGNED:
            # the class's verdict holds for every member: record it on the chosen node, then AllocateFunc
            self.plugin.record(cast(VolcanoTask, prepared), name, v.assignment or 0)
            self.plugin.allocate(pod.uid, name)

    def on_rollback(self, pod: Pod, name: str) -> None:
        self.plugin.deallocate(pod.uid, name)

    def close(self) -> list[CloseEntry]:
        handed = self.plugin.close()
        if self.cache is not None:
            self.cache.add_session_close(handed)
        return handed


@dataclass(frozen=True)
class VolcanoProfile(Profile):
    """`cache`: Volcano's scheduler cache of a Volcano-managed cluster kept across sessions
    (ENGINE.md §3.8); each session starts from its views and hands its placements back to it.
    Without one, every session sees the nodes as the kubelet has pinned them."""

    name: ClassVar[str] = "volcano"
    summary: ClassVar[str] = "Volcano's numa-aware plugin as upstream decides: CPU only, per container, legacy merge"

    cache: NumaCache | None = field(default=None, compare=False)

    def open(self, cluster: Cluster) -> ProfileSession:
        return _VolcanoSession(cluster, self.weight, self.cache)


# -- aligned ---------------------------------------------------------------------------------------------


class _AlignedSession(ProfileSession):
    def __init__(self, cluster: Cluster, distance_tie_break: bool = False) -> None:
        self.cluster = cluster
        self.nodes = cluster.nodes
        self.distance_tie_break = distance_tie_break
        self.distances: dict[tuple[int, int], float] = {}  # (node shape, NUMA mask) → mean distance
        self.admissions = Admissions(cluster)

    def state_key(self, name: str) -> Hashable:
        return kubelet_state(self.nodes[name])

    def prepare(self, pod: Pod) -> Hashable:
        return kubelet_reading(pod)

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        node = self.nodes[name]
        res = self.admissions.admit(name, pod, prepared)
        if not res.admitted:
            return NodeVerdict(UNSCHEDULABLE, reason=res.reason, code=UNSCHEDULABLE_AND_UNRESOLVABLE,
                               admission=res)
        mask = node.numa_mask_of(res.allocations)
        return NodeVerdict(PASSED, admission=res, numa_count=mask.bit_count(), numa_mask=mask, cpus=res.cpus.mask)

    def scores(self, prepared: object, verdicts: Sequence[NodeVerdict]) -> list[int] | None:
        return normalize_scores([v.numa_count for v in verdicts])

    def admission(self, name: str, pod: Pod, verdict: NodeVerdict) -> AdmitResult | None:
        """The verdict is the admission on a node of the class, for a pod of the same shape: the nodes
        of a class share everything the admission reads (shape, settings, free CPUs, devices in use),
        except the static Memory Manager's NUMA groups, which the state key does not hold."""
        res = verdict.admission
        if res is None or self.nodes[name].kubelet.static_memory:
            return None
        return res.relabeled(name, pod.uid)

    def tie_break(self, name: str, verdict: NodeVerdict) -> float:
        """With `distance_tie_break`: the placement's mean NUMA distance on the node (0 when the machine
        reports none), cached per node shape and mask."""
        if not self.distance_tie_break:
            return 0.0
        key = (self.cluster.static_id(name), verdict.numa_mask)
        value = self.distances.get(key)
        if value is None:
            value = self.distances[key] = self.nodes[name].topology.mean_distance(verdict.numa_mask) or 0.0
        return value


@dataclass(frozen=True)
class AlignedProfile(Profile):
    """`distance_tie_break`: among equally narrow placements on different nodes, prefer the lowest
    mean NUMA distance (what `prefer-closest-numa-nodes` does between masks inside one node)."""

    name: ClassVar[str] = "aligned"
    summary: ClassVar[str] = ("predicts the kubelet exactly: node scope, CPU, memory, hugepages and devices, "
                              "modern merge")

    distance_tie_break: bool = False

    def open(self, cluster: Cluster) -> ProfileSession:
        return _AlignedSession(cluster, self.distance_tie_break)


# -- unaware ---------------------------------------------------------------------------------------------


class _UnawareSession(ProfileSession):
    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        return NodeVerdict(PASSED)


@dataclass(frozen=True)
class UnawareProfile(Profile):
    name: ClassVar[str] = "unaware"
    summary: ClassVar[str] = "resource fit only, no NUMA awareness (the default kube-scheduler's view)"

    def open(self, cluster: Cluster) -> ProfileSession:
        return _UnawareSession()


#: every profile by name, in the order pages list them
PROFILES: dict[str, type[Profile]] = {p.name: p for p in (VolcanoProfile, AlignedProfile, UnawareProfile,
                                                          NRTProfile, KaiProfile, KoordinatorProfile)}


def get_profile(profile: str | Profile, weight: int = 1) -> Profile:
    """The profile named `profile` with the numa-aware `weight` (a Profile object is returned as is)."""
    if isinstance(profile, Profile):
        return profile
    cls = PROFILES.get(profile) if isinstance(profile, str) else None
    if cls is None:
        raise PolicyError(f"unknown scheduler profile {profile!r}; expected one of: {', '.join(PROFILES)}")
    return cls(weight=weight)
