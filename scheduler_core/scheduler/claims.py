"""A pod's DRA claims in a session (ENGINE.md §8.5). Upstream's scheduler allocates a pod's claims on the node it
picks with the structured allocator, blind to NUMA; the kubelet then pins CPUs and memory without seeing the
devices. `volcano` and `unaware` do exactly that. `aligned` asks the allocator for devices on the NUMA nodes
its prediction (the kubelet's own admission) pins the pod's CPUs and memory on; a device of unknown NUMA node
is not taken for that. When there is no such allocation on a node, a pod whose task policy is
`single-numa-node` or `restricted` (it asked for alignment) does not go there: the next node is tried; any
other pod takes upstream's NUMA-blind choice on the node and is shown misaligned. A pod whose claim or
template is missing waits, as upstream's scheduler does. A pod without claims costs
one dictionary lookup. The session's allocations live here and in its result; the DraState given is not
changed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypedDict

from ..dra.alignment import AlignmentDict, check, pinned_numa
from ..dra.allocator import AllocationError, Allocator
from ..dra.model import Device, DeviceResult, DraState, ResourceClaim
from ..model.node import Allocation, Node
from ..model.pods import Pod

#: task policies that ask for alignment: under `aligned`, their devices must sit on the pod's NUMA nodes
ALIGNING = ("single-numa-node", "restricted")
#: upstream's DRA plugin's reason for a node where the pod's claims cannot be allocated
CANNOT_ALLOCATE = "cannot allocate all claims"


class DeviceDict(TypedDict):
    request: str
    driver: str
    pool: str
    device: str
    kind: str
    numa: int | None
    numa_source: str


class ClaimDict(TypedDict):
    claim: str
    template: str | None
    devices: list[DeviceDict]


class ClaimsDict(TypedDict):
    claims: list[ClaimDict]
    why: str
    numa: list[int]
    alignment: AlignmentDict
    detail: str


@dataclass(frozen=True)
class Choice:
    """The devices chosen for a pod's claims on one node, and why."""

    claims: tuple[ResourceClaim, ...]
    results: tuple[tuple[DeviceResult, ...], ...]
    why: str


def _numas(mask: int) -> str:
    return ",".join(str(i) for i in range(mask.bit_length()) if mask >> i & 1)


class SessionClaims:
    """The claims of a session's pods: which pods have any, where they can be allocated, what they hold."""

    def __init__(self, dra: DraState, aligned: bool) -> None:
        self.state = dra
        self.aligned = aligned
        self.allocator = Allocator(dra.classes, dra.slices)
        self.in_use: set[tuple[str, str, str]] = {r.key for c in dra.claims.values() for r in c.allocation or ()}
        self.held: dict[str, list[tuple[str, str, str]]] = {}
        self.pending: dict[tuple[str, str], tuple[ResourceClaim, ...]] = {}
        #: pods whose claim or template is not among the objects: upstream's scheduler waits for it
        self.missing: dict[tuple[str, str], str] = {}
        for key, names in dra.pod_claims.items():
            claims = []
            for name in names:
                claim = dra.claims.get(name)
                if claim is None:
                    claims.append(ResourceClaim(*name))
                    self.missing[key] = f'resourceclaim.resource.k8s.io "{name[1]}" not found'
                elif claim.allocation is None:
                    claims.append(claim)
            if claims:
                self.pending[key] = tuple(claims)
        for (namespace, pod), refs in dra.pod_templates.items():
            made = []
            for pod_claim, template in refs:
                spec = dra.templates.get((namespace, template)) or ResourceClaim(namespace, template)
                if (namespace, template) not in dra.templates:
                    self.missing[(namespace, pod)] = f'resourceclaimtemplate.resource.k8s.io "{template}" not found'
                # the claim the controller would generate from the template: `<pod>-<pod claim>`, unallocated
                made.append(ResourceClaim(namespace, f"{pod}-{pod_claim}", spec.requests, spec.constraints,
                                          template=template))
            self.pending[(namespace, pod)] = self.pending.get((namespace, pod), ()) + tuple(made)

    def claims_of(self, pod: Pod) -> tuple[ResourceClaim, ...]:
        return self.pending.get((pod.namespace, pod.name), ())

    def choose(self, pod: Pod, claims: tuple[ResourceClaim, ...], candidates: Iterable[tuple[str, int]],
               ) -> tuple[str, Choice] | str:
        """The first candidate (node, predicted NUMA mask), in the session's order, where the claims can be
        allocated, with the devices; or the reason none can (an allocator error names the claim)."""
        missing = self.missing.get((pod.namespace, pod.name))
        if missing is not None:
            return missing
        required = self.aligned and pod.topology_policy in ALIGNING
        try:
            for name, mask in candidates:
                choice = self._on_node(name, claims, mask, required)
                if choice is not None:
                    return name, choice
        except AllocationError as exc:
            return str(exc)
        return CANNOT_ALLOCATE

    def _on_node(self, name: str, claims: tuple[ResourceClaim, ...], mask: int, required: bool) -> Choice | None:
        allocate = self.allocator.allocate
        if self.aligned and mask:
            def near(device: Device) -> bool:
                return device.numa is not None and bool(mask >> device.numa & 1)

            results = allocate(name, claims, self.in_use, usable=near)
            if results is not None:
                return Choice(claims, tuple(results), f"aligned: devices on NUMA {_numas(mask)}, where the kubelet "
                                                      "pins the pod's CPUs and memory")
            if required:
                return None
        results = allocate(name, claims, self.in_use)
        if results is None:
            return None
        why = "upstream's allocator: the first free devices in pool, slice and device order that pass the " \
              "selectors and constraints; NUMA is not considered"
        if self.aligned and mask:
            why = f"no allocation on NUMA {_numas(mask)} exists on this node; {why}"
        return Choice(claims, tuple(results), why)

    def commit(self, pod: Pod, node: Node, choice: Choice, allocations: Sequence[Allocation]) -> ClaimsDict:
        """Hold the chosen devices for the pod; its explanation, aligned against what the kubelet pinned."""
        keys = [r.key for results in choice.results for r in results]
        self.in_use.update(keys)
        self.held[pod.uid] = keys
        cpus, memory = pinned_numa(allocations, node.topology)
        devices: list[Device] = []
        claims: list[ClaimDict] = []
        for claim, results in zip(choice.claims, choice.results, strict=True):
            rows: list[DeviceDict] = []
            for r in results:
                device = self.state.device(r.key)
                assert device is not None  # the allocator chose it from the state's slices
                devices.append(device)
                rows.append({"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device,
                             "kind": device.kind, "numa": device.numa, "numa_source": device.numa_source})
            claims.append({"claim": f"{claim.namespace}/{claim.name}", "template": claim.template, "devices": rows})
        alignment = check(devices, cpus, memory)
        return {"claims": claims, "why": choice.why, "numa": sorted({d.numa for d in devices if d.numa is not None}),
                "alignment": alignment.to_dict(), "detail": alignment.detail}

    def release(self, pod: Pod) -> None:
        """Give back what the pod holds (its job was rolled back)."""
        self.in_use.difference_update(self.held.pop(pod.uid, ()))
