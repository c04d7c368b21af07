"""The claim change that would align a misaligned claim (ENGINE.md §8.6): a `matchAttribute` constraint over all
its requests on the NUMA attribute its devices' drivers publish (KEP-6072's way), or on their
`resource.kubernetes.io/pcieRoot` when that is what placed them; and, when the pod's CPUs are pinned on one
NUMA node, a selector per request keeping its devices there. The change is verified: the allocator allocates
the changed claim on the node, other claims' devices held, and the result is checked for alignment."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from .alignment import Alignment, AlignmentDict, check
from .allocator import AllocationError, Allocator
from .model import Constraint, Device, DeviceRequest, DeviceResult, DraState, ResourceClaim
from .objects import PCIE_ROOT


class SuggestionDict(TypedDict):
    found: bool
    constraint: dict[str, object] | None
    selectors: list[str]
    devices: list[list[str]]
    alignment: AlignmentDict | None
    detail: str


@dataclass(frozen=True)
class Suggestion:
    """`claim` is the changed claim (None when no change can be made); `found` when the allocator allocates it
    on the node and its devices are aligned; `devices` what it would get."""

    found: bool
    claim: ResourceClaim | None
    constraint: Constraint | None
    selectors: tuple[str, ...]
    devices: tuple[DeviceResult, ...]
    alignment: Alignment | None
    detail: str

    def to_dict(self) -> SuggestionDict:
        constraint: dict[str, object] | None = None
        if self.constraint is not None:
            constraint = {"requests": list(self.constraint.requests), "matchAttribute": self.constraint.match_attribute}
        return {"found": self.found, "constraint": constraint, "selectors": list(self.selectors),
                "devices": [[r.request, r.driver, r.pool, r.device] for r in self.devices],
                "alignment": None if self.alignment is None else self.alignment.to_dict(), "detail": self.detail}


def _attribute(devices: list[Device]) -> str | None:
    """The one attribute every device's NUMA node was read from, or their common pcieRoot attribute."""
    names = {d.numa_source.removeprefix("attribute ") for d in devices}
    if len(names) == 1 and not next(iter(names)).startswith(("unknown", "pcieRoot")):
        return names.pop()
    if devices and all(isinstance(d.attributes.get(PCIE_ROOT), str) for d in devices):
        return PCIE_ROOT
    return None


def _pinned(request: DeviceRequest, attribute: str, numa: int) -> DeviceRequest:
    domain, _, ident = attribute.rpartition("/")
    selector = f'device.attributes["{domain}"].{ident} == {numa}'
    if request.first_available:
        return dataclasses.replace(request, first_available=tuple(_pinned(s, attribute, numa)
                                                                   for s in request.first_available))
    return dataclasses.replace(request, selectors=(*request.selectors, selector))


def suggest(claim: ResourceClaim, state: DraState, node: str, cpu_numa: frozenset[int] = frozenset(),
            memory_numa: frozenset[int] = frozenset(), allocator: Allocator | None = None,
            held: Iterable[tuple[str, str, str]] | None = None) -> Suggestion:
    """The change to `claim` that aligns its devices on `node` (with the pod's pinned CPUs and memory when
    given), verified by the allocator; `found` False with the reason when there is none. For many claims, a
    caller passes `allocator` (one built on `state`'s classes and slices: its selector verdicts are kept) and
    `held` (the allocated devices the node can see, its own slices' and the shared ones'), else both are made
    afresh from `state`, each time."""
    own = {r.key for r in claim.allocation or ()}
    current = [d for k in own if (d := state.device(k)) is not None]
    attribute = _attribute(current or [d for d in state.devices_on(node) if d.numa is not None])
    if attribute is None:
        return Suggestion(False, None, None, (), (), None, "the devices' drivers publish no common NUMA attribute "
                          "(different names, or none): no matchAttribute constraint can align them")
    constraint = Constraint(tuple(r.name for r in claim.requests), attribute, None)
    requests = claim.requests
    selectors: tuple[str, ...] = ()
    if len(cpu_numa) == 1 and attribute != PCIE_ROOT:
        (numa,) = cpu_numa
        requests = tuple(_pinned(r, attribute, numa) for r in claim.requests)
        domain, _, ident = attribute.rpartition("/")
        selectors = (f'device.attributes["{domain}"].{ident} == {numa}',)
    changed = dataclasses.replace(claim, requests=requests, constraints=(*claim.constraints, constraint),
                                  allocation=None)
    taken = set(held) if held is not None else {r.key for c in state.claims.values() for r in c.allocation or ()}
    taken -= own
    try:
        results = (allocator or Allocator(state.classes, state.slices)).allocate(node, [changed], taken)
    except AllocationError as exc:
        return Suggestion(False, changed, constraint, selectors, (), None, f"the changed claim is refused: {exc}")
    if results is None:
        return Suggestion(False, changed, constraint, selectors, (), None,
                          f"no allocation of the changed claim exists on {node} (its free devices do not allow it)")
    devices = [d for r in results[0] if (d := state.device(r.key)) is not None]
    alignment = check(devices, cpu_numa, memory_numa)
    verdict = "aligned" if alignment.aligned else "still misaligned"
    return Suggestion(alignment.aligned, changed, constraint, selectors, results[0], alignment,
                      f"verified by the allocator on {node}: {verdict} ({alignment.detail})")
