"""A pod as the alignment units the Topology Manager hints for (KAI's `buildNumaRequests`).

Pod scope: one unit, the pod-level request of every resource (init peak against the long-running
sum). Container scope: *concurrent* units (native sidecars, then app containers) that share the zone
ledger, and *serial* units (ordinary init containers) each aligned on its own against the pristine
availability. CPU counts only where the CPU Manager pins it: integral requests in a Guaranteed pod."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..model.pods import GUARANTEED, SIDECAR, Container, Pod, guaranteed_cpus, pod_level

#: one alignment unit: {resource: amount} with only positive amounts (cpu in millicores)
Unit = Mapping[str, int]


def _unit(pod: Pod, c: Container) -> dict[str, int]:
    out = {r: v for r, v in c.requests.items() if v > 0 and r != "cpu"}
    cpu = guaranteed_cpus(pod, c) * 1000
    if cpu:
        out["cpu"] = cpu
    return out


def _requested(resource: str) -> Callable[[Container], int]:
    return lambda c: c.requests.get(resource, 0)


@dataclass(frozen=True, eq=False)
class PodRequests:
    """A pod's units per scope, its QoS and the resources it asks for at all (pod level > 0).
    Compared and hashed by identity: the plugin's caches are keyed by the reading itself."""

    guaranteed: bool
    requested: frozenset[str]
    pod_scope: tuple[Unit, ...]
    concurrent: tuple[Unit, ...]
    serial: tuple[Unit, ...]

    @classmethod
    def of(cls, pod: Pod) -> PodRequests:
        units = {c.name: _unit(pod, c) for c in pod.all_containers()}
        names = sorted({r for c in pod.all_containers() for r in c.requests if r != "cpu"})
        whole = {r: pod_level(pod, _requested(r)) for r in names}
        whole["cpu"] = pod_level(pod, lambda c: units[c.name].get("cpu", 0))
        whole = {r: v for r, v in whole.items() if v > 0}
        sidecars = tuple(units[c.name] for c in pod.init_containers if c.kind == SIDECAR)
        serial = tuple(units[c.name] for c in pod.init_containers if c.kind != SIDECAR)
        apps = tuple(units[c.name] for c in pod.containers)
        requested = frozenset(r for c in pod.all_containers() for r, v in c.requests.items() if v > 0)
        return cls(pod.qos_class == GUARANTEED, requested, (whole,), sidecars + apps, serial)

    def for_scope(self, scope: str) -> tuple[tuple[Unit, ...], tuple[Unit, ...]]:
        """(concurrent, serial) units under the node's Topology Manager scope."""
        if scope == "pod":
            return self.pod_scope, ()
        return self.concurrent, self.serial
