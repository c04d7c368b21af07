"""What every Topology Manager scope shares (the kubelet's `scope.go`, ENGINE.md §2.5): the
`HintProvider` protocol the device, CPU and memory managers implement, the admission errors, one
`Decision` per merge, and the `Scope` base that asks the providers for hints, merges them under the
node's policy and lets each provider allocate, in registration order. The scopes themselves are
`scope_none`, `scope_container` and `scope_pod`; `scopes.scope_for` picks one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

from ...errors import EngineError
from ...model.cpuset import CPUSet
from ...model.kubelet_config import TopologyOptions
from ...model.node import Allocation
from ...model.pods import Container, Pod
from .hint import ProviderHints, TopologyHint
from .merge import MergeResult, merge_hints

TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"


class HintProvider(Protocol):
    """A manager the Topology Manager consults (upstream `HintProvider`): its hints for a container
    (container scope) or the whole pod (pod scope), and `allocate`, which pins the container's
    resources with the merged hint and returns them as an `Allocation` holding only its part.
    `resource` is what an allocation failure is reported against (None: several resources)."""

    @property
    def resource(self) -> str | None: ...

    def get_topology_hints(self, pod: Pod, container: Container, /) -> ProviderHints: ...

    def get_pod_topology_hints(self, pod: Pod, /) -> ProviderHints: ...

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint, /) -> Allocation: ...


class AdmissionError(EngineError):
    """A pod the kubelet rejects; `reason` is the admission reason the kubelet reports. A provider's
    error of this kind keeps its reason and text (upstream `GetPodAdmitResult`)."""

    reason = "UnexpectedAdmissionError"

    def __init__(self, message: str, container: str | None = None, resource: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.container = container
        self.resource = resource

    def located(self, container: str, resource: str | None) -> Self:
        """The same error, naming the container and resource it happened to."""
        return type(self)(self.message, container, resource)

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "message": self.message, "container": self.container,
                "resource": self.resource}


class TopologyAffinityError(AdmissionError):
    """The Topology Manager's policy did not admit the merged hint of a container (or the pod)."""

    reason = "TopologyAffinityError"


@dataclass
class Decision:
    """One Topology Manager decision: for a container (container scope) or the pod (pod scope,
    `container` None): every provider's hints by resource and the merge result."""

    container: str | None
    hints: dict[str, Sequence[TopologyHint] | None]
    merge: MergeResult | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "container": self.container,
            "hints": {r: None if hs is None else [h.to_dict() for h in hs] for r, hs in self.hints.items()},
            "merge": None if self.merge is None else self.merge.to_dict(),
        }


class Scope:
    """One admission of one pod: the node's policy and machine, the providers in registration order,
    the decisions taken and what each container was given (`allocated`, by container name)."""

    def __init__(self, policy: str, providers: Sequence[HintProvider], numa_ids: Sequence[int],
                 options: TopologyOptions, distances: Mapping[int, Sequence[int]] | None) -> None:
        self.policy, self.providers = policy, providers
        self.numa_ids, self.options, self.distances = numa_ids, options, distances
        self.decisions: list[Decision] = []
        self.allocated: dict[str, Allocation] = {}

    def admit(self, pod: Pod) -> None:
        """Admit `pod` or raise the `AdmissionError` that stops it; `decisions` and `allocated` say
        how far it got."""
        raise NotImplementedError

    def merge(self, pod: Pod, container: Container | None) -> MergeResult:
        """Merge every provider's hints for `container` (None: the pod) and record the decision;
        raise `TopologyAffinityError` when the policy does not admit the merged hint."""
        if container is None:
            provided = [p.get_pod_topology_hints(pod) for p in self.providers]
        else:
            provided = [p.get_topology_hints(pod, container) for p in self.providers]
        merged = self._merged(provided)
        hints: dict[str, Sequence[TopologyHint] | None] = {}
        for p in provided:
            hints.update(p or {})
        name = None if container is None else container.name
        decision = Decision(name, hints, merged)
        self.decisions.append(decision)
        if not merged.admit:
            raise TopologyAffinityError(TOPOLOGY_AFFINITY_MESSAGE, name, self._fault(decision))
        return merged

    def _merged(self, provided: list[ProviderHints]) -> MergeResult:
        """`merge_hints` of the providers' answers, remembered by the hints' identities (see `_MERGES`)."""
        key = (self.policy, tuple(self.numa_ids), self.options, id(self.distances),
               tuple(_identities(p) for p in provided))
        entry = _MERGES.get(key)
        if entry is not None:
            return entry[0]
        merged = merge_hints(self.policy, provided, self.numa_ids, self.options, self.distances)
        if len(_MERGES) >= _MERGES_LIMIT:
            _MERGES.clear()
        _MERGES[key] = (merged, (self.distances, [tuple(hs or ()) for p in provided for hs in (p or {}).values()]))
        return merged

    def _fault(self, decision: Decision) -> str | None:
        """The resource that cannot be aligned: the first whose hints alone are refused, else the
        resources whose hints conflict with each other."""
        constrained = []
        for res, hs in decision.hints.items():
            alone = merge_hints(self.policy, [{res: hs}], self.numa_ids, self.options, self.distances)
            if not alone.admit:
                return res
            if hs is None or any(h.affinity is not None for h in hs):
                constrained.append(res)
        return " + ".join(constrained) or None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        """`allocateAlignedResources`: every provider allocates in turn; `allocated` gets the
        container's parts put together. A provider's failure becomes an `AdmissionError`."""
        parts = []
        for provider in self.providers:
            try:
                parts.append(provider.allocate(pod, container, hint))
            except AdmissionError as exc:
                raise exc.located(container.name, provider.resource) from exc
            except EngineError as exc:
                raise AdmissionError(f"Allocate failed due to {exc}, which is unexpected", container.name,
                                     provider.resource) from exc
        self.allocated[container.name] = _joined(pod.uid, container.name, parts)


#: Merge results by (policy, NUMA ids, options, distances, every provider's answer with its hints by
#: `id`). The providers hand out shared, immutable hint objects (one pair per NUMA mask and CPU index,
#: and the device hints cached by free state), so nodes in the same state ask the same merge again. An
#: entry keeps alive every object its key names by `id`, so while it exists no other object can have
#: those ids: a key that matches names the very same hints.
_MERGES: dict[tuple[object, ...], tuple[MergeResult, object]] = {}
_MERGES_LIMIT = 4096


def _identities(provided: ProviderHints) -> tuple[tuple[str, tuple[int, ...] | None], ...] | None:
    if provided is None:
        return None
    return tuple((res, None if hs is None else tuple(map(id, hs))) for res, hs in provided.items())


def _joined(pod: str, container: str, parts: Sequence[Allocation]) -> Allocation:
    """One container's allocation from its providers' parts (each holds what its provider pinned)."""
    cpus: CPUSet | None = None
    memory: dict[int, Mapping[str, int]] = {}
    devices: dict[str, tuple[str, ...]] = {}
    for part in parts:
        if part.cpus:
            cpus = part.cpus if cpus is None else cpus | part.cpus
        memory.update(part.memory)
        devices.update(part.devices)
    if cpus is None:
        return Allocation(pod, container, memory=memory, devices=devices)
    return Allocation(pod, container, cpus, memory, devices)
