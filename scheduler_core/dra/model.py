"""DRA's objects as the engine holds them: devices with their NUMA node (and where it came from), device
classes, claims with their requests, constraints and allocation, and the cluster's whole DRA state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


class Version(str):
    """A `version` attribute's text (semver 2.0.0): a str, marked so CEL sees a version and matchAttribute
    tells it from a string of the same text."""

    __slots__ = ()


#: an attribute's value: DRA's bool, int, string and version, or a list of them (KEP-5491's list types)
AttributeValue = bool | int | str | tuple[bool | int | str, ...]

#: the kinds of device the alignment check names
DEVICE_KINDS = ("gpu", "nic", "cpu", "other")


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice. `attributes` are keyed by their qualified name (an unqualified name
    is in the driver's domain, as DRA defines it: `numaNode` of driver `dra.net` is `dra.net/numaNode`).
    `kind` is guessed from the driver's name, then the device's own `type`/`kind` attribute, then the
    DeviceClass of a request it was allocated to (objects.py `KIND_WORDS`); "other" when none says.
    `numa` is its NUMA node, `numa_source` where that came from ("unknown" when nothing said)."""

    driver: str
    pool: str
    name: str
    node: str | None
    attributes: Mapping[str, AttributeValue] = field(hash=False)
    capacity: Mapping[str, int] = field(hash=False)
    kind: str = "other"
    numa: int | None = None
    numa_source: str = "unknown"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A ResourceSlice: one part (`count` parts make the pool) of a pool's `generation`. A slice is local to
    `node`, or usable from every node (`all_nodes`), or from the nodes its `node_selector` picks (terms
    ORed, each term's requirements ANDed: (key, operator, values))."""

    name: str
    driver: str
    pool: str
    generation: int
    count: int
    node: str | None
    all_nodes: bool
    node_selector: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...] | None
    devices: tuple[Device, ...]


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: its CEL selectors, all of which a device must pass."""

    name: str
    selectors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A request of a claim: `count` devices (ExactCount) or every matching device (All) of `device_class`
    passing `selectors`, or, when `first_available` is set, the first of those sub-requests that can be
    satisfied (a sub-request's results name the request "<request>/<sub-request>")."""

    name: str
    device_class: str = ""
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    first_available: tuple[DeviceRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    """A claim constraint over `requests` (all requests when empty): every device chosen for them has the
    same value of `match_attribute`, or a different value of `distinct_attribute`."""

    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One device allocated to a claim's request."""

    request: str
    driver: str
    pool: str
    device: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A ResourceClaim (or a template's claim spec). `allocation` is None until allocated; `reserved_for`
    names the pods using it as "namespace/name"; `template` the ResourceClaimTemplate it was made from."""

    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    allocation: tuple[DeviceResult, ...] | None = None
    reserved_for: tuple[str, ...] = ()
    template: str | None = None


@dataclass
class DraState:
    """Every DRA object of a cluster. `pod_claims` maps (namespace, pod) to the claims the pod uses, its
    templates resolved to the claims generated for it when the pod's status names them."""

    slices: list[ResourceSlice] = field(default_factory=list)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[tuple[str, str], ResourceClaim] = field(default_factory=dict)
    templates: dict[tuple[str, str], ResourceClaim] = field(default_factory=dict)
    pod_claims: dict[tuple[str, str], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: (namespace, pod) → the ResourceClaimTemplates (pod claim name, template name) whose claim is not
    #: generated yet: a pending pod's claims, made from the template when a session places it
    pod_templates: dict[tuple[str, str], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    _devices: dict[tuple[str, str, str], Device] | None = field(default=None, repr=False, compare=False)

    def is_empty(self) -> bool:
        return not (self.slices or self.classes or self.claims or self.templates or self.pod_claims
                    or self.pod_templates)

    def devices_on(self, node: str) -> list[Device]:
        """The devices of the slices local to `node`, in slice then device order."""
        return [d for s in self.slices if s.node == node for d in s.devices]

    def device(self, key: tuple[str, str, str]) -> Device | None:
        """The device (driver, pool, name) of any slice, None when no slice publishes it (an index built on
        first use: the slices are read once and not changed after)."""
        if self._devices is None:
            self._devices = {d.key: d for s in self.slices for d in s.devices}
        return self._devices.get(key)

    def devices_of(self, namespace: str, pod: str) -> list[Device]:
        """The devices allocated to the pod's claims (claims in the pod's order, results in their order);
        a result naming a device no slice publishes is left out."""
        out: list[Device] = []
        for claim_key in self.pod_claims.get((namespace, pod), ()):
            claim = self.claims.get(claim_key)
            for result in (claim.allocation or ()) if claim else ():
                device = self.device(result.key)
                if device is not None:
                    out.append(device)
        return out
