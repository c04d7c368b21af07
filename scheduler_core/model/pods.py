"""Pods and containers as the kubelet sees them: requests and limits, QoS class, the integer-CPU
rule, and the pod-level aggregation over init, sidecar (restartable init) and app containers.

Units: `cpu` in millicores; `memory` and `hugepages-*` in bytes; any other resource is a device
count. Containers are validated on construction (RequestError names the container and resource).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import cast

from ..errors import RequestError, check_int
from .names import check_printable

APP, INIT, SIDECAR = "app", "init", "sidecar"
CONTAINER_KINDS = (APP, INIT, SIDECAR)
GUARANTEED, BURSTABLE, BEST_EFFORT = "Guaranteed", "Burstable", "BestEffort"
QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)
INT32 = (-(2**31), 2**31 - 1)
#: characters an annotation's value may hold besides printable ones (a JSON value written as a YAML block)
_TEXT_SPACE = str.maketrans("", "", "\n\r\t")
#: per field (labels, annotations), the pairs `_pairs` last returned (held, so `is` compares live objects)
_checked: dict[str, tuple[tuple[str, str], ...]] = {}


def is_memory_resource(name: str) -> bool:
    return name == "memory" or name.startswith("hugepages-")


def is_device_resource(name: str) -> bool:
    """Device-plugin (extended) resources: everything but cpu, memory, hugepages and storage."""
    return name not in ("cpu", "ephemeral-storage", "pods") and not is_memory_resource(name)


def _amounts(values: Mapping[str, object] | None, container: str, what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for res, amount in (values or {}).items():
        if not isinstance(res, str) or not res:
            raise RequestError(f"container {container}: resource names must be non-empty strings")
        out[res] = check_int(amount, f"container {container}: {what} {res}", field=res)
    return out


@dataclass(frozen=True)
class Container:
    """A container's `requests` and `limits` (as in a Pod spec; a request left out defaults to
    the limit, as the API server does). `kind` is app, init, or sidecar (restartable init)."""

    name: str
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    kind: str = APP

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise RequestError("every container needs a non-empty name")
        check_printable(self.name, "container name", field="name")
        if self.kind not in CONTAINER_KINDS:
            raise RequestError(
                f"container {self.name}: kind {self.kind!r} is not one of {', '.join(CONTAINER_KINDS)}")
        requests = _amounts(self.requests, self.name, "request")
        limits = _amounts(self.limits, self.name, "limit")
        for res, amount in limits.items():
            requests.setdefault(res, amount)
        for res, amount in requests.items():
            if is_device_resource(res) and res in limits and limits[res] != amount:
                raise RequestError(f"container {self.name}: request and limit of {res} must be equal")
            if res in limits and amount > limits[res]:
                raise RequestError(
                    f"container {self.name}: request of {res} ({amount}) exceeds its limit ({limits[res]})")
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "limits", limits)

    @classmethod
    def guaranteed(cls, name: str, cpu_milli: int = 0, memory: int = 0, kind: str = APP,
                   devices: Mapping[str, int] | None = None) -> Container:
        """A container whose limits equal its requests (Guaranteed when cpu and memory are set)."""
        res: dict[str, int] = {}
        if cpu_milli:
            res["cpu"] = cpu_milli
        if memory:
            res["memory"] = memory
        res.update(devices or {})
        return cls(name, res, dict(res), kind)

    @property
    def cpu_milli(self) -> int:
        return self.requests.get("cpu", 0)

    def device_requests(self) -> dict[str, int]:
        """Device-plugin resources this container asks for (from limits, as the kubelet reads them)."""
        return {r: n for r, n in self.limits.items() if is_device_resource(r) and n > 0}

    def memory_requests(self) -> dict[str, int]:
        return {r: n for r, n in self.requests.items() if is_memory_resource(r) and n > 0}


@dataclass(frozen=True)
class Pod:
    """A pod: `init_containers` (init and sidecar, in spec order) and `containers` (app).

    `qos` overrides the computed QoS class (for vectors that state it); `topology_policy` is the
    Volcano annotation `volcano.sh/numa-topology-policy` (None when absent). `labels` and
    `annotations` are the pod's metadata as (key, value) pairs sorted by key (a mapping given is
    turned into them; `label_map` / `annotation_map` read them as mappings), and `priority` its
    spec.priority (None when not set): schedulers such as Koordinator read them, the kubelet does not.
    """

    name: str
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()
    namespace: str = "default"
    uid: str = ""
    qos: str | None = None
    topology_policy: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    priority: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise RequestError("a pod needs a non-empty name")
        check_printable(self.name, "pod name", field="name")
        check_printable(self.namespace, "namespace", field="namespace")
        object.__setattr__(self, "containers", tuple(self.containers))
        object.__setattr__(self, "init_containers", tuple(self.init_containers))
        if not self.uid:
            object.__setattr__(self, "uid", f"{self.namespace}/{self.name}")
        check_printable(self.uid, "pod uid", field="uid")
        names = [c.name for c in self.all_containers()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise RequestError(f"pod {self.name}: container name {dup[0]!r} is used twice")
        for c in self.containers:
            if c.kind != APP:
                raise RequestError(f"pod {self.name}: container {c.name} is listed as app but has kind {c.kind}")
        for c in self.init_containers:
            if c.kind == APP:
                raise RequestError(f"pod {self.name}: init container {c.name} must have kind init or sidecar")
        if self.qos is not None and self.qos not in QOS_CLASSES:
            raise RequestError(f"pod {self.name}: QoS class {self.qos!r} is not one of {', '.join(QOS_CLASSES)}")
        if self.labels or not isinstance(self.labels, tuple):
            object.__setattr__(self, "labels", _pairs(self.labels, f"pod {self.name}: label", "labels", False))
        if self.annotations or not isinstance(self.annotations, tuple):
            object.__setattr__(self, "annotations",
                               _pairs(self.annotations, f"pod {self.name}: annotation", "annotations", True))
        if self.priority is not None:
            check_int(self.priority, f"pod {self.name}: priority", INT32[0], field="pod_priority")
            if self.priority > INT32[1]:
                raise RequestError(f"pod {self.name}: priority must be at most {INT32[1]}, not {self.priority}",
                                   "pod_priority")

    @property
    def label_map(self) -> Mapping[str, str]:
        """The labels as a read-only mapping."""
        return MappingProxyType(dict(self.labels))

    @property
    def annotation_map(self) -> Mapping[str, str]:
        """The annotations as a read-only mapping."""
        return MappingProxyType(dict(self.annotations))

    def all_containers(self) -> Iterator[Container]:
        """The kubelet's container order: init containers (incl. sidecars) in spec order, then app."""
        yield from self.init_containers
        yield from self.containers

    @property
    def qos_class(self) -> str:
        return self.qos or qos_class(self)


def _pairs(given: object, what: str, field: str, multiline: bool) -> tuple[tuple[str, str], ...]:
    """Labels or annotations (a mapping or (key, value) pairs) as pairs sorted by key: keys non-empty
    printable strings, each once; values printable strings (an annotation's may also hold newlines and
    tabs). The RequestError names the key and `field`."""
    if given is _checked.get(field):  # the replicas of a template share its pairs: checked once
        return cast(tuple[tuple[str, str], ...], given)
    if isinstance(given, Mapping):
        items: Iterable[object] = given.items()
    elif isinstance(given, tuple | list):
        items = given
    else:
        raise RequestError(f"{what}s must be an object of key: value strings, not {type(given).__name__}", field)
    out: dict[str, str] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise RequestError(f"{what}s must be (key, value) pairs, not {item!r:.80}", field)
        key, value = item
        if not isinstance(key, str) or not key:
            raise RequestError(f"{what} keys must be non-empty strings, not {key!r:.80}", field)
        check_printable(key, f"{what} key", field=field)
        if not isinstance(value, str):
            raise RequestError(f"{what} {key!r}: the value must be a string, not {value!r:.80}", field)
        if not (printable_annotation(value) if multiline else value.isprintable()):
            text = value.translate(_TEXT_SPACE) if multiline else value
            bad = next(c for c in text if not c.isprintable())
            raise RequestError(f"{what} {key!r}: the value holds the character {bad!r} (U+{ord(bad):04X}); "
                               f"values must be printable{' (newlines and tabs aside)' if multiline else ''}", field)
        if key in out:
            raise RequestError(f"{what} {key!r} is given twice", field)
        out[key] = value
    pairs = _checked[field] = tuple(sorted(out.items()))
    return pairs


def printable_annotation(value: str) -> bool:
    """Whether an annotation's value may be kept: printable, newlines and tabs aside."""
    return value.translate(_TEXT_SPACE).isprintable()


def qos_class(pod: Pod) -> str:
    """Kubernetes QoS: Guaranteed iff every container sets cpu and memory limits equal to requests;
    BestEffort iff no container sets any cpu or memory request or limit; else Burstable."""
    any_set = False
    guaranteed = True
    for c in pod.all_containers():
        for res in ("cpu", "memory"):
            req, lim = c.requests.get(res, 0), c.limits.get(res, 0)
            if req or lim:
                any_set = True
            if not lim or req != lim:
                guaranteed = False
    if not any_set:
        return BEST_EFFORT
    return GUARANTEED if guaranteed else BURSTABLE


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Exclusive CPUs of a container (ENGINE.md §2.6): its integer CPU request in a Guaranteed pod."""
    if pod.qos_class != GUARANTEED:
        return 0
    milli = container.cpu_milli
    if milli % 1000:
        return 0
    return milli // 1000


def pod_level(pod: Pod, amount_of: Callable[[Container], int]) -> int:
    """The kubelet's pod-level aggregate of a per-container amount:
    `max(Σ app + Σ sidecar, max over init of (sidecars started before it + that init))`."""
    sidecar_sum = 0
    init_max = 0
    for c in pod.init_containers:
        if c.kind == SIDECAR:
            sidecar_sum += amount_of(c)
        else:
            init_max = max(init_max, sidecar_sum + amount_of(c))
    app_sum = sum(amount_of(c) for c in pod.containers)
    return max(init_max, app_sum + sidecar_sum)


def pod_guaranteed_cpus(pod: Pod) -> int:
    """Pod-level exclusive CPU count (ENGINE.md §2.6)."""
    return pod_level(pod, lambda c: guaranteed_cpus(pod, c) if "cpu" in c.requests else 0)


def pod_device_request(pod: Pod, resource: str) -> int:
    """Pod-level device count for one resource (ENGINE.md §2.9)."""
    return pod_level(pod, lambda c: c.limits.get(resource, 0))


def pod_memory_request(pod: Pod) -> dict[str, int]:
    """Pod-level memory/hugepages bytes (ENGINE.md §2.8): only resources an app container asks for."""
    wanted = {r for c in pod.containers for r in c.memory_requests()}
    return {r: pod_level(pod, _request_of(r)) for r in sorted(wanted)}


def _request_of(resource: str) -> Callable[[Container], int]:
    return lambda c: c.requests.get(resource, 0)
