"""What a scheduler profile is to a session: a `Profile` is a small immutable object carrying its
options (the volcano profile its plugin weight); `profile.open(cluster)` starts one session's use of it
and returns the `ProfileSession` whose hooks the session calls:

- `state_key(node)`: what besides the node's shape, settings and request tally decides this
  profile's verdicts there (nodes with equal keys are evaluated once, as a class);
- `prepare(pod)`: the profile's reading of a pod, once per pod;
- `evaluate(node, pod, prepared)` → `NodeVerdict` for a node that passed the resource-fit filter;
- `scores(prepared, verdicts)` → one score per passing verdict, or None when the profile does not
  score this pod;
- `tie_break(node, verdict)`: orders nodes of equal score and NUMA span before their names;
- `on_place` / `on_rollback`: a pod was bound to a node / its gang was rolled back;
- `admission(node, pod, verdict)`: the kubelet's admission on the chosen node when the verdict already
  is exactly that (aligned), else None and the session runs it;
- `close()`: what the profile hands over when the session ends.

The profiles themselves are in `profiles` (the registry, and Volcano's, the kubelet's and the unaware
one) and `plugin_profiles` (other schedulers' NUMA plugins)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..errors import check_int
from ..kubelet.admission import AdmitResult
from ..model.pods import Pod
from ..volcano.numaaware import (
    CloseEntry,
)
from .cluster import Cluster
from .explain import NodeVerdict


class ProfileSession:
    """One session's use of a profile. The defaults: no extra state, nothing scored, nothing to hand over."""

    def state_key(self, name: str) -> Hashable:
        return None

    def prepare(self, pod: Pod) -> object:
        return None

    def evaluate(self, name: str, pod: Pod, prepared: object) -> NodeVerdict:
        raise NotImplementedError

    def scores(self, prepared: object, verdicts: Sequence[NodeVerdict]) -> list[int] | None:
        """One score per verdict, or None. The session passes one verdict per distinct (outcome, NUMA
        count) among the passing ones, so a score may depend on those two and on the set of them
        (e.g. the largest NUMA count), not on anything else in the verdict or on how many nodes share it."""
        return None

    def tie_break(self, name: str, verdict: NodeVerdict) -> float:
        """Orders nodes with equal score and NUMA count before their names (lower first); 0: by name.
        Asked once per node class, so it may depend on the node's shape and settings, not its name."""
        return 0.0

    def on_place(self, pod: Pod, prepared: object, name: str, verdict: NodeVerdict) -> None:
        """The scheduler bound `pod` to node `name` (before the kubelet's admission there)."""

    def admission(self, name: str, pod: Pod, verdict: NodeVerdict) -> AdmitResult | None:
        """The kubelet's admission of `pod` on `name` when the verdict already is exactly that (None:
        the session runs it)."""
        return None

    def on_rollback(self, pod: Pod, name: str) -> None:
        """The pod's gang did not reach minAvailable: undo what `on_place` did."""

    def close(self) -> list[CloseEntry]:
        return []


@dataclass(frozen=True)
class Profile:
    """A scheduler profile and its options; subclasses set `name` and `summary` and implement `open`."""

    name: ClassVar[str]
    summary: ClassVar[str]

    #: the numa-aware plugin weight; only the volcano profile scores with it
    weight: int = 1

    def __post_init__(self) -> None:
        check_int(self.weight, "numa-aware weight", None)

    def open(self, cluster: Cluster) -> ProfileSession:
        raise NotImplementedError
