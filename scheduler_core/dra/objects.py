"""kubectl's DRA objects → `DraState`: ResourceSlices, DeviceClasses, ResourceClaims and ResourceClaimTemplates
of `resource.k8s.io/v1` (v1beta1's and v1beta2's field names read too: `basic`, requests without `exactly`),
and the pods' `spec.resourceClaims`. Each device's NUMA node is read, in this order, from the standard
attribute `resource.kubernetes.io/numaNode`; a driver's own name (`numa` or `numaNode` in the driver's domain,
`dra.net/numaNode`, `dra.cpu/numaNodeID`); or its `resource.kubernetes.io/pcieRoot` matched to the PCI devices
of the node's topology (PCIE_NOTE). Bad input is a FormatError naming the object and the field."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

from ..errors import EngineError, FormatError
from ..model.quantity import count
from ..model.topology import Topology
from .model import (
    AttributeValue,
    Constraint,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    DraState,
    ResourceClaim,
    ResourceSlice,
    Version,
)

JSONObject = dict[str, object]

DRA_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate")
STANDARD_NUMA = "resource.kubernetes.io/numaNode"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
#: NUMA attributes of drivers that do not publish the standard one, after `numa` and `numaNode` in the
#: driver's own domain
DRIVER_NUMA = ("dra.net/numaNode", "dra.cpu/numaNodeID")
#: PCIE_NOTE: a pcieRoot `pciDDDD:BB` is the root complex whose buses start at BB in PCI domain DDDD; it holds
#: the topology's PCI devices of that domain from bus BB up to the next root the node's slices publish. The
#: device gets their NUMA node when they all have the same single one, else none.
_ROOT = re.compile(r"^pci([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2})$")
_BUS_ID = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):[0-9a-fA-F]{2}\.[0-7]")
#: words in a driver's name, a device's `type`/`kind` attribute or a DeviceClass's name that say its kind
KIND_WORDS = {"gpu": "gpu", "mig": "gpu", "nic": "nic", "net": "nic", "network": "nic", "rdma": "nic",
              "sriov": "nic", "cpu": "cpu"}
REQUEST_MODES = ("ExactCount", "All")


def read_dra(objects: Sequence[JSONObject], topologies: Mapping[str, Topology] | None = None) -> DraState:
    """The DRA objects among `objects` (others are ignored) as a DraState; `topologies` (node → Topology)
    places devices that publish only a pcieRoot. Pods' claims are read by `read_pod_claims`."""
    state = DraState()
    for i, obj in enumerate(objects):
        kind = obj.get("kind")
        if kind not in DRA_KINDS:
            continue
        where = f"item {i} ({kind})"
        meta = _object(obj, "metadata", where)
        name = _text(meta, "name", f"{where}: metadata", required=True)
        where = f"{kind} {name}"
        namespace = _text(meta, "namespace", f"{where}: metadata") or "default"
        spec = _object(obj, "spec", where)
        if kind == "ResourceSlice":
            state.slices.append(_slice(name, spec, f"{where}: spec"))
        elif kind == "DeviceClass":
            state.classes[name] = DeviceClass(name, _selectors(spec, f"{where}: spec"))
        elif kind == "ResourceClaim":
            claim = _claim(namespace, name, spec, f"{where}: spec")
            state.claims[(namespace, name)] = _claim_status(claim, _object(obj, "status", where), f"{where}: status")
        else:
            state.templates[(namespace, name)] = _claim(namespace, name, _object(spec, "spec", f"{where}: spec"),
                                                        f"{where}: spec.spec")
    state.slices = [_placed(s, state.slices, (topologies or {}).get(s.node or "")) for s in state.slices]
    _kinds_from_claims(state)
    return state


def read_pod_claims(state: DraState, pod: JSONObject, where: str) -> None:
    """The claims a Pod object uses into `state.pod_claims`: `resourceClaimName` as is, a template's claim
    by the name the pod's `status.resourceClaimStatuses` gives it (a generated claim is marked with its
    template); a template whose claim is not generated yet into `state.pod_templates`."""
    meta = _object(pod, "metadata", where)
    pod_name = _text(meta, "name", f"{where}: metadata", required=True)
    namespace = _text(meta, "namespace", f"{where}: metadata") or "default"
    spec = _object(pod, "spec", where)
    generated = {}
    for entry in _list(_object(pod, "status", where), "resourceClaimStatuses", f"{where}: status"):
        status = _as_object(entry, f"{where}: status.resourceClaimStatuses[]")
        if status.get("resourceClaimName"):
            generated[_text(status, "name", f"{where}: status.resourceClaimStatuses[]")] = \
                _text(status, "resourceClaimName", f"{where}: status.resourceClaimStatuses[]")
    claims: list[tuple[str, str]] = []
    waiting: list[tuple[str, str]] = []
    for j, entry in enumerate(_list(spec, "resourceClaims", f"{where}: spec")):
        at = f"{where}: spec.resourceClaims[{j}]"
        ref = _as_object(entry, at)
        ref = _object(ref, "source", at) or ref  # the alpha API's `source`
        claim_name = _text(ref, "resourceClaimName", at)
        template = _text(ref, "resourceClaimTemplateName", at)
        if template:
            pod_claim = _text(_as_object(entry, at), "name", at, required=True)
            claim_name = generated.get(pod_claim, "")
            key = (namespace, claim_name)
            if claim_name and key in state.claims:
                state.claims[key] = dataclasses.replace(state.claims[key], template=template)
            elif not claim_name:
                waiting.append((pod_claim, template))
        if claim_name:
            claims.append((namespace, claim_name))
    if claims:
        state.pod_claims[(namespace, pod_name)] = tuple(claims)
    if waiting:
        state.pod_templates[(namespace, pod_name)] = tuple(waiting)


# -- checked access ----------------------------------------------------------------------------------------
def _as_object(value: object, where: str) -> JSONObject:
    if isinstance(value, dict):
        return value
    if not value:
        return {}
    raise FormatError(f"{where} must be an object, not {type(value).__name__}")


def _object(obj: JSONObject, key: str, where: str) -> JSONObject:
    return _as_object(obj.get(key), f"{where}.{key}")


def _list(obj: JSONObject, key: str, where: str) -> list[object]:
    value = obj.get(key)
    if isinstance(value, list):
        return value
    if not value:
        return []
    raise FormatError(f"{where}.{key} must be a list, not {type(value).__name__}")


def _text(obj: JSONObject, key: str, where: str, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise FormatError(f"{where}.{key} is required")
        return ""
    if not isinstance(value, str):
        raise FormatError(f"{where}.{key} must be a string, not {value!r}")
    return value


def _int(obj: JSONObject, key: str, where: str, default: int, minimum: int = 0) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FormatError(f"{where}.{key} must be an integer of at least {minimum}, not {value!r}")
    return value


# -- slices ------------------------------------------------------------------------------------------------
def _slice(name: str, spec: JSONObject, where: str) -> ResourceSlice:
    driver = _text(spec, "driver", where, required=True)
    pool = _object(spec, "pool", where)
    pool_name = _text(pool, "name", f"{where}.pool", required=True)
    node = _text(spec, "nodeName", where) or None
    all_nodes = spec.get("allNodes") is True
    selector = _node_selector(spec.get("nodeSelector"), f"{where}.nodeSelector")
    devices = []
    seen: set[str] = set()
    for j, entry in enumerate(_list(spec, "devices", where)):
        at = f"{where}.devices[{j}]"
        dev = _as_object(entry, at)
        dev_name = _text(dev, "name", at, required=True)
        if dev_name in seen:
            raise FormatError(f"{at}.name: device {dev_name!r} appears twice in the slice")
        seen.add(dev_name)
        body = _object(dev, "basic", at) or dev  # v1beta1 nests attributes and capacity under `basic`
        devices.append(Device(driver, pool_name, dev_name, _text(dev, "nodeName", at) or node,
                              _attributes(driver, body, at), _capacity(body, at)))
    return ResourceSlice(name, driver, pool_name, _int(pool, "generation", f"{where}.pool", 0),
                         _int(pool, "resourceSliceCount", f"{where}.pool", 1, 1), node, all_nodes, selector,
                         tuple(devices))


def _node_selector(value: object, where: str) -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...] | None:
    if value is None:
        return None
    terms = []
    for j, term in enumerate(_list(_as_object(value, where), "nodeSelectorTerms", where)):
        at = f"{where}.nodeSelectorTerms[{j}]"
        reqs = []
        for field_name in ("matchExpressions", "matchFields"):
            for k, expr in enumerate(_list(_as_object(term, at), field_name, at)):
                e = _as_object(expr, f"{at}.{field_name}[{k}]")
                key = _text(e, "key", f"{at}.{field_name}[{k}]", required=True)
                values = tuple(str(v) for v in _list(e, "values", f"{at}.{field_name}[{k}]"))
                operator = _text(e, "operator", f"{at}.{field_name}[{k}]", required=True)
                if operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                    raise FormatError(f"{at}.{field_name}[{k}].operator: {operator!r} is not a node selector "
                                      "operator")
                reqs.append(("metadata.name" if field_name == "matchFields" else key, operator, values))
        terms.append(tuple(reqs))
    return tuple(terms)


_SCALARS = {"bool": bool, "int": int, "string": str, "version": str}
_LISTS = {"bools": "bool", "ints": "int", "strings": "string", "versions": "version"}


def _scalar(kind: str, value: object, where: str) -> bool | int | str:
    if (kind == "bool") != isinstance(value, bool) or not isinstance(value, _SCALARS[kind]):
        raise FormatError(f"{where} must be a {kind}, not {value!r}")
    assert isinstance(value, bool | int | str)
    return Version(value) if kind == "version" else value


def _attributes(driver: str, body: JSONObject, where: str) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for name, entry in _object(body, "attributes", where).items():
        at = f"{where}.attributes[{name}]"
        value = _as_object(entry, at)
        typed = [k for k in (*_SCALARS, *_LISTS) if k in value]
        if len(typed) != 1:
            raise FormatError(f"{at} must have exactly one of bool, int, string, version, bools, ints, strings, "
                              "versions")
        kind = typed[0]
        key = str(name) if "/" in str(name) else f"{driver}/{name}"
        if kind in _LISTS:
            items = _list(value, kind, at)
            out[key] = tuple(_scalar(_LISTS[kind], v, f"{at}.{kind}[{j}]") for j, v in enumerate(items))
        else:
            out[key] = _scalar(kind, value[kind], f"{at}.{kind}")
    return out


def _capacity(body: JSONObject, where: str) -> dict[str, int]:
    out = {}
    for name, entry in _object(body, "capacity", where).items():
        at = f"{where}.capacity[{name}]"
        value = entry.get("value") if isinstance(entry, dict) else entry  # v1alpha3: the quantity itself
        try:
            out[str(name)] = count(value, at)
        except EngineError as exc:
            raise FormatError(str(exc)) from None
    return out


def _numa(device: Device) -> tuple[int | None, str]:
    names = (STANDARD_NUMA, f"{device.driver}/numa", f"{device.driver}/numaNode", *DRIVER_NUMA)
    for name in names:
        value = device.attributes.get(name)
        if isinstance(value, tuple) and len(value) == 1:  # a list of one NUMA node
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value, f"attribute {name}"
    return None, "unknown"


def _bus(text: str) -> tuple[int, int] | None:
    """(domain, bus) of a PCI bus id or a pcieRoot, None for any other text."""
    match = _ROOT.match(text) or _BUS_ID.match(text)
    return (int(match[1], 16), int(match[2], 16)) if match else None


def _placed(piece: ResourceSlice, slices: list[ResourceSlice], topology: Topology | None) -> ResourceSlice:
    """The slice with each device's NUMA node and kind set (the module docstring's order)."""
    roots: set[tuple[int, int]] = set()
    if topology is not None:
        for s in slices:
            if s.node == piece.node:
                roots.update(r for d in s.devices if (r := _bus(str(d.attributes.get(PCIE_ROOT, "")))))
    devices = []
    for device in piece.devices:
        numa, source = _numa(device)
        root = device.attributes.get(PCIE_ROOT)
        if numa is None and topology is not None and isinstance(root, str) and (at := _bus(root)):
            numa = _numa_under(at, roots, topology)
            source = f"pcieRoot {root} matched to the node's topology" if numa is not None else source
        devices.append(dataclasses.replace(device, numa=numa, numa_source=source, kind=_kind(device)))
    return dataclasses.replace(piece, devices=tuple(devices))


def _numa_under(root: tuple[int, int], roots: set[tuple[int, int]], topology: Topology) -> int | None:
    domain, first = root
    end = min((bus for d, bus in roots if d == domain and bus > first), default=256)
    found = set()
    for dev in topology.devices:
        at = _bus(dev.id)
        if at and at[0] == domain and first <= at[1] < end and dev.numa:
            found.add(dev.numa)
    only = found.pop() if len(found) == 1 else ()
    return only[0] if len(only) == 1 else None


def _words_kind(text: str) -> str | None:
    return next((KIND_WORDS[w] for w in re.split(r"[^a-z0-9]+", text.lower()) if w in KIND_WORDS), None)


def _kind(device: Device) -> str:
    if kind := _words_kind(device.driver):
        return kind
    for name in ("type", "kind"):
        value = device.attributes.get(f"{device.driver}/{name}")
        if isinstance(value, str) and (kind := _words_kind(value)):
            return kind
    return "other"


def _kinds_from_claims(state: DraState) -> None:
    """Devices of kind "other" allocated to a request: the kind its DeviceClass's name says."""
    kinds: dict[tuple[str, str, str], str] = {}
    for claim in state.claims.values():
        requests = {r.name: r for r in claim.requests}
        requests.update({f"{r.name}/{s.name}": s for r in claim.requests for s in r.first_available})
        for result in claim.allocation or ():
            request = requests.get(result.request)
            if request is not None and (kind := _words_kind(request.device_class)):
                kinds.setdefault(result.key, kind)
    if not kinds:
        return
    state.slices = [dataclasses.replace(s, devices=tuple(
        dataclasses.replace(d, kind=kinds[d.key]) if d.kind == "other" and d.key in kinds else d
        for d in s.devices)) for s in state.slices]


# -- classes and claims ------------------------------------------------------------------------------------
def _selectors(spec: JSONObject, where: str) -> tuple[str, ...]:
    out = []
    for j, entry in enumerate(_list(spec, "selectors", where)):
        at = f"{where}.selectors[{j}]"
        out.append(_text(_object(_as_object(entry, at), "cel", at), "expression", f"{at}.cel", required=True))
    return tuple(out)


def _request(entry: JSONObject, where: str, *, sub: bool = False) -> DeviceRequest:
    name = _text(entry, "name", where, required=True)
    body = _object(entry, "exactly", where) or entry  # v1 nests a plain request under `exactly`
    at = f"{where}.exactly" if body is not entry else where
    first = () if sub else tuple(_request(_as_object(s, f"{where}.firstAvailable[{k}]"),
                                          f"{where}.firstAvailable[{k}]", sub=True)
                                 for k, s in enumerate(_list(entry, "firstAvailable", where)))
    mode = _text(body, "allocationMode", at) or "ExactCount"
    if mode not in REQUEST_MODES:
        raise FormatError(f"{at}.allocationMode must be ExactCount or All, not {mode!r}")
    device_class = _text(body, "deviceClassName", at)  # the allocator refuses a missing one in upstream's words
    return DeviceRequest(name, device_class, _selectors(body, at), mode, _int(body, "count", at, 1, 1), first)


def _claim(namespace: str, name: str, spec: JSONObject, where: str) -> ResourceClaim:
    devices = _object(spec, "devices", where)
    at = f"{where}.devices"
    requests = tuple(_request(_as_object(r, f"{at}.requests[{j}]"), f"{at}.requests[{j}]")
                     for j, r in enumerate(_list(devices, "requests", at)))
    constraints = []
    for j, entry in enumerate(_list(devices, "constraints", at)):
        c = _as_object(entry, f"{at}.constraints[{j}]")
        constraints.append(Constraint(tuple(str(r) for r in _list(c, "requests", f"{at}.constraints[{j}]")),
                                      _text(c, "matchAttribute", f"{at}.constraints[{j}]") or None,
                                      _text(c, "distinctAttribute", f"{at}.constraints[{j}]") or None))
    return ResourceClaim(namespace, name, requests, tuple(constraints))


def _claim_status(claim: ResourceClaim, status: JSONObject, where: str) -> ResourceClaim:
    allocation = _object(status, "allocation", where)
    results = None
    if allocation:
        at = f"{where}.allocation.devices"
        results = []
        for j, entry in enumerate(_list(_object(allocation, "devices", f"{where}.allocation"), "results", at)):
            r = _as_object(entry, f"{at}.results[{j}]")
            results.append(DeviceResult(*(_text(r, k, f"{at}.results[{j}]", required=True)
                                          for k in ("request", "driver", "pool", "device"))))
    reserved = tuple(f"{claim.namespace}/{_text(_as_object(r, f'{where}.reservedFor[]'), 'name', where)}"
                     for r in _list(status, "reservedFor", where)
                     if _as_object(r, f"{where}.reservedFor[]").get("resource", "pods") == "pods")
    return dataclasses.replace(claim, allocation=None if results is None else tuple(results), reserved_for=reserved)
