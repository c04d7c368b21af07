"""The structured-parameters allocator (k8s.io/dynamic-resource-allocation/structured, ENGINE.md §8.2): the
claims of one pod allocated on one node by the same exhaustive depth-first search upstream runs. Claims in
order, each claim's requests in order, each request's devices one after the other; a device is tried from
pools, slices and devices in their order, skipped when another claim holds it or is allocating it, when a
class or request CEL selector rejects it, or when a constraint (`matchAttribute`: the values of all devices
intersect; `distinctAttribute`: they are pairwise disjoint; a scalar is a one-value set) would break; the
first full solution wins, and a dead end undoes the last choice. `All` takes every selectable device or
fails; `firstAvailable` tries its sub-requests in order. Errors carry upstream's words."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import EngineError
from . import cel
from .model import AttributeValue, Device, DeviceClass, DeviceRequest, DeviceResult, ResourceClaim, ResourceSlice
from .pools import Pool, gather_pools

#: upstream's AllocationResultsMaxSize: at most this many devices in one claim's allocation
MAX_RESULTS = 32


class AllocationError(EngineError):
    """A claim the allocator cannot even try (a missing class, a selector that fails, an `All` request on a
    pool being updated, ...); the message is upstream's."""


class _TooMany(Exception):
    """Upstream's errAllocationResultMaxSizeExceeded: raised and caught inside the search only."""


def _kobj(claim: ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


def _device_id(device: Device) -> str:
    return f"{device.driver}/{device.pool}/{device.name}"


@dataclass
class _Request:
    """A request, or one sub-request of a `firstAvailable` list, as the search needs it."""

    claim: int
    request: DeviceRequest
    parent: DeviceRequest | None
    device_class: DeviceClass
    devices: int = 0
    all_devices: list[Device] = field(default_factory=list)

    @property
    def result_name(self) -> str:
        return f"{self.parent.name}/{self.request.name}" if self.parent else self.request.name


def _values(value: AttributeValue | None) -> frozenset[tuple[str, object]] | None:
    """An attribute's values as a set of (type, value): a scalar is one value, a list each of its own."""
    if value is None:
        return None
    items = value if isinstance(value, tuple) else (value,)
    return frozenset((type(v).__name__, v) for v in items)


class _Constraint:
    """matchAttribute (`match`: the running intersection must stay non-empty) or distinctAttribute (each
    device's values disjoint from every other's). A stack per device added, so backtracking restores the
    state before it: the fix of kubernetes#140300."""

    def __init__(self, requests: tuple[str, ...], attribute: str, match: bool) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.match = match
        self.stack: list[frozenset[tuple[str, object]]] = []

    def applies(self, request: _Request) -> bool:
        if not self.requests:
            return True
        if request.parent is None:
            return request.request.name in self.requests
        return request.parent.name in self.requests or request.result_name in self.requests

    def add(self, request: _Request, device: Device) -> bool:
        if not self.applies(request):
            return True
        values = _values(device.attributes.get(self.attribute))
        if values is None:
            return False
        if self.match:
            values = values & self.stack[-1] if self.stack else values
            if not values:
                return False
        elif any(values & other for other in self.stack):
            return False
        self.stack.append(values)
        return True

    def remove(self, request: _Request, device: Device) -> None:
        if self.applies(request):
            self.stack.pop()


class Allocator:
    """Upstream's Allocator for a cluster's classes and slices; `allocate` may be called for many nodes and
    pods. A selector sees only a device's driver, attributes and capacity, so its verdict is kept per
    (selector, what the device looks like): the same GPU on a thousand nodes is evaluated once."""

    def __init__(self, classes: Mapping[str, DeviceClass], slices: Sequence[ResourceSlice]) -> None:
        self.classes = classes
        self._local: dict[str, list[tuple[int, ResourceSlice]]] = {}
        self._shared: list[tuple[int, ResourceSlice]] = []
        for i, piece in enumerate(slices):
            if piece.node:
                self._local.setdefault(piece.node, []).append((i, piece))
            else:
                self._shared.append((i, piece))
        #: the nodes some slice serves (those with slices of their own); None when a slice not bound to one
        #: node (all nodes, a node selector) may serve any
        self.served: frozenset[str] | None = None if self._shared else frozenset(self._local)
        self._verdicts: dict[tuple[str, object], bool] = {}
        self._looks: dict[tuple[str, str, str], object] = {}
        self._activations: dict[object, dict[str, object]] = {}

    def pools(self, node: str, labels: Mapping[str, str] | None = None) -> list[Pool]:
        slices = sorted(self._local.get(node, []) + self._shared, key=lambda p: p[0])
        return gather_pools([s for _, s in slices], node, labels or {})

    def allocate(self, node: str, claims: Sequence[ResourceClaim], allocated: frozenset[tuple[str, str, str]]
                 | set[tuple[str, str, str]] = frozenset(), labels: Mapping[str, str] | None = None,
                 usable: Callable[[Device], bool] | None = None) -> list[tuple[DeviceResult, ...]] | None:
        """Each claim's results on `node` (claims in order), or None when no allocation exists there;
        `allocated` holds the keys of devices other claims already own. `usable` narrows the devices an
        ExactCount request may take (numaweb's aligned choice; upstream has none). AllocationError as
        upstream errs."""
        return _Search(self, node, claims, allocated, self.pools(node, labels), usable).run()

    def selectable(self, request: _Request, device: Device, claim: ResourceClaim) -> bool:
        """Does the device pass the class's selectors, then the request's (upstream's isSelectable)."""
        for owner, selectors in ((request.device_class, request.device_class.selectors),
                                 (None, request.request.selectors)):
            look = self._looks.get(device.key)
            if look is None:
                look = self._looks[device.key] = (device.driver, frozenset(device.attributes.items()),
                                                  frozenset(device.capacity.items()))
            for i, expression in enumerate(selectors):
                key = (expression, look)
                verdict = self._verdicts.get(key)
                if verdict is None:
                    verdict = self._verdicts[key] = self._evaluate(expression, device, look, owner, claim, i)
                if not verdict:
                    return False
        return True

    def _evaluate(self, expression: str, device: Device, look: object, owner: DeviceClass | None,
                  claim: ResourceClaim, index: int) -> bool:
        where = f"class {owner.name}" if owner else f"claim {_kobj(claim)}"
        try:
            cel.compile_selector(expression)
        except cel.SelectorError as exc:
            raise AllocationError(f"{where}: selector #{index}: CEL {exc}") from None
        variables = self._activations.get(look)
        if variables is None:
            variables = self._activations[look] = cel.activation(device)
        try:
            return cel.matches(expression, variables)
        except cel.SelectorError as exc:
            raise AllocationError(f"{where}: selector #{index} on device {_device_id(device)}: {exc}") from None


class _Search:
    """One Allocate call: the requests checked, then the depth-first search (upstream's allocateOne)."""

    def __init__(self, allocator: Allocator, node: str, claims: Sequence[ResourceClaim],
                 allocated: frozenset[tuple[str, str, str]] | set[tuple[str, str, str]], pools: list[Pool],
                 usable: Callable[[Device], bool] | None) -> None:
        self.allocator = allocator
        self.usable = usable
        self.node = node
        self.claims = claims
        self.allocated = allocated
        self.pools = pools
        self.requests: dict[tuple[int, int, int], _Request] = {}
        self.constraints: list[list[_Constraint]] = []
        self.allocating: dict[tuple[str, str, str], set[int]] = {}
        self.results: list[list[DeviceResult]] = [[] for _ in claims]

    def run(self) -> list[tuple[DeviceResult, ...]] | None:
        for c, claim in enumerate(self.claims):
            self._check(c, claim)
        try:
            done = self._one(0, 0, 0, 0, False)
        except _TooMany:
            raise AllocationError("allocation max size exceeded") from None
        if not done:
            if any(p.invalid for p in self.pools):
                raise AllocationError("invalid resource pools were encountered")
            return None
        return [tuple(r) for r in self.results]

    def _check(self, c: int, claim: ResourceClaim) -> None:
        minimum = 0
        for r, request in enumerate(claim.requests):
            if request.first_available:
                least = None
                for s, sub in enumerate(request.first_available):
                    data = self.requests[(c, r, s)] = self._request(c, claim, sub, request)
                    least = data.devices if least is None else min(least, data.devices)
                minimum += least or 0
            else:
                data = self.requests[(c, r, 0)] = self._request(c, claim, request, None)
                minimum += data.devices
        if minimum > MAX_RESULTS:
            raise AllocationError(f"claim {_kobj(claim)}: number of requested devices {minimum} exceeds the "
                                  f"claim limit of {MAX_RESULTS}")
        constraints = []
        for i, con in enumerate(claim.constraints):
            if con.match_attribute:
                constraints.append(_Constraint(con.requests, con.match_attribute, True))
            elif con.distinct_attribute:
                constraints.append(_Constraint(con.requests, con.distinct_attribute, False))
            else:
                raise AllocationError(f"claim {_kobj(claim)}, constraint #{i}: empty constraint (unsupported "
                                      "constraint type?)")
        self.constraints.append(constraints)

    def _request(self, c: int, claim: ResourceClaim, request: DeviceRequest, parent: DeviceRequest | None,
                 ) -> _Request:
        where = f"claim {_kobj(claim)}, request {request.name}"
        if not request.device_class:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.allocator.classes.get(request.device_class)
        if device_class is None:
            raise AllocationError(f"{where}: could not retrieve device class {request.device_class}: "
                                  f'deviceclass.resource.k8s.io "{request.device_class}" not found')
        data = _Request(c, request, parent, device_class)
        if request.allocation_mode == "ExactCount":
            data.devices = request.count
            return data
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.pool_id} is "
                                      "currently being updated")
            if pool.invalid:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.pool_id} is "
                                      "currently invalid")
            data.all_devices += [d for s in pool.slices for d in s.devices
                                 if self.allocator.selectable(data, d, claim)]
        data.devices = len(data.all_devices)
        return data

    def _in_use(self, key: tuple[str, str, str]) -> bool:
        return key in self.allocated or bool(self.allocating.get(key))

    def _one(self, c: int, r: int, s: int, d: int, in_sub: bool) -> bool:
        """Allocate device `d` of request `r` (sub-request `s`) of claim `c` and everything after it."""
        if c >= len(self.claims):
            return True
        claim = self.claims[c]
        if r >= len(claim.requests):
            try:
                return self._one(c + 1, 0, 0, 0, False)
            except _TooMany:  # a later claim could not fit: no point retrying this claim's last choices
                return False
        data = self.requests[(c, r, s)]
        if not in_sub and data.parent is not None:
            return self._first_available(c, r, d)
        if data.request.allocation_mode == "All" and not data.all_devices:
            return False
        if d >= data.devices:
            return self._one(c, r + 1, 0, 0, False)
        if len(self.results[c]) + data.devices - d > MAX_RESULTS:
            raise _TooMany
        if data.request.allocation_mode == "All":
            undo = self._take(data, data.all_devices[d], must=True)
            if undo is None:
                return False
            return self._then(undo, c, r, s, d, in_sub)
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for piece in pool.slices:
                for device in piece.devices:
                    if self._in_use(device.key) or not self.allocator.selectable(data, device, claim) \
                            or (self.usable is not None and not self.usable(device)):
                        continue
                    undo = self._take(data, device, must=False)
                    if undo is not None and self._then(undo, c, r, s, d, in_sub):
                        return True
        return False

    def _then(self, undo: Callable[[], None], c: int, r: int, s: int, d: int, in_sub: bool) -> bool:
        """The search past a device just taken; the device given back unless that found a solution."""
        try:
            done = self._one(c, r, s, d + 1, in_sub)
        except BaseException:
            undo()
            raise
        if not done:
            undo()
        return done

    def _first_available(self, c: int, r: int, d: int) -> bool:
        """The sub-requests in order; the first with a solution wins. Raises _TooMany when every one failed
        for exceeding the result limit."""
        all_too_many = True
        s = 0
        while (c, r, s) in self.requests:
            try:
                done = self._one(c, r, s, d, True)
            except _TooMany:
                s += 1
                continue
            all_too_many = False
            if done:
                return True
            s += 1
        if all_too_many:
            raise _TooMany
        return False

    def _take(self, data: _Request, device: Device, must: bool) -> Callable[[], None] | None:
        """Take the device for the request if it is free and every constraint admits it (upstream's
        allocateDevice); returns what gives it back, None when it cannot be taken."""
        if self._in_use(device.key):
            return None
        constraints = self.constraints[data.claim]
        for i, con in enumerate(constraints):
            if not con.add(data, device):
                if must:
                    raise AllocationError(f"claim {_kobj(self.claims[data.claim])}, request {data.request.name}: "
                                          f"cannot add device {_device_id(device)} because a claim constraint "
                                          "would not be satisfied")
                for earlier in constraints[:i]:
                    earlier.remove(data, device)
                return None
        self.allocating.setdefault(device.key, set()).add(data.claim)
        results = self.results[data.claim]
        results.append(DeviceResult(data.result_name, device.driver, device.pool, device.name))
        taken = len(results) - 1

        def undo() -> None:
            for con in constraints:
                con.remove(data, device)
            self.allocating[device.key].discard(data.claim)
            del results[taken:]

        return undo
