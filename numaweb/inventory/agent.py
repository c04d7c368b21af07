"""Node agents' reports (`numaweb-agent`, scheduler_core/agent) applied to the inventory, and what the pages
and the API show of them.

A report is applied whole or not at all, in one transaction holding its node (and any other node of the
cluster that loses a pod to it):
- unchanged (the same digest as the node's last report: everything but its time and agent) it writes
  nothing but the node's `NodeReport.received_at`/`reported_at` (no generation, no history row);
- changed, the node takes the report's topology (devices the Device Manager registered replace the PCI
  devices of the same resource), its kubelet settings from the reported `config.yaml` (else it keeps its
  own), and the kubelet's checkpoints become its allocations with origin `observed` (`observed_at`: the
  report's time). They replace the node's earlier observed, imported and replayed ones, and any other
  allocation of a pod the kubelet holds (on this node or, released, on another); a scheduled allocation
  that no longer fits beside them is released too (named in `notes`). The generation goes up once
  (`node.save` below, as `services.import_node` does it) and every node released from (`services.release`).
  The state check (the model's replay of the checkpoints, `scheduler_core.kubelet.state_check`) runs and
  its verdict and disagreements are kept on `NodeReport`.

A report for a node that reported less than `NUMAWEB_AGENT_MIN_INTERVAL` seconds before is refused (429):
the limit is per node, read from the row the report is compared with anyway, so one token can serve every
node of a cluster. A node whose last report is older than `NUMAWEB_AGENT_STALE_SECONDS` is stale
(`agent_status`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from numaweb.access.roles import AGENT, role_of
from numaweb.jobs import services as jobs
from numaweb.jobs.bounds import OutOfBounds, check_subdomain
from scheduler_core.agent import REPORT_KIND
from scheduler_core.errors import EngineError
from scheduler_core.formats import kubelet_config as kubelet_file
from scheduler_core.formats.kubelet_state import cpu_state, device_state, memory_state
from scheduler_core.kubelet.state_check import check_state
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.topology import Topology

from . import dra, services
from .models import AgentBinding, Allocation, Cluster, Node, NodeReport

KUBELET_FILES = ("config", "cpu_manager_state", "memory_manager_state", "device_checkpoint")
#: the report's parts that do not describe the node: a report differing only in them is unchanged
VOLATILE = ("time", "agent")


class ReportRefused(ValueError):
    """A report that cannot be applied: `field` names the part at fault (HTTP 400)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class ReportForbidden(PermissionError):
    """The sender may not report for this cluster (HTTP 403)."""


class ReportTooSoon(Exception):
    """The node reported less than NUMAWEB_AGENT_MIN_INTERVAL seconds ago (HTTP 429): an agent in a loop, or
    two agents claiming one node. `wait`: seconds until a report is taken again."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"this node reported less than {settings.NUMAWEB_AGENT_MIN_INTERVAL} s ago")
        self.wait = wait


@dataclass
class Outcome:
    node: Node
    changed: bool
    created: bool = False
    observed: int = 0
    released: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    report: NodeReport | None = None

    def to_dict(self) -> dict[str, Any]:
        status = agent_status(self.report)
        return {"node": self.node.pk, "name": self.node.name, "cluster": self.node.cluster_id,
                "changed": self.changed, "created": self.created, "generation": self.node.generation,
                "observed": self.observed, "released": self.released, "notes": self.notes,
                "check": status["check"] if status else None}


@dataclass
class _Parsed:
    """A report read and checked: what the node becomes."""

    cluster: Cluster
    name: str
    time: datetime
    digest: str
    topology: dict[str, Any]
    config: KubeletConfig | None
    memory_reservation: dict[str, int]
    files: dict[str, str | None]
    observed: dict[tuple[str, str], dict[str, Any]]
    device_numa: dict[str, int]
    registered: dict[str, list[str]]
    data: Mapping[str, Any]


def _text(data: Mapping[str, Any], key: str, field_name: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ReportRefused(field_name, f"{field_name} must be a non-empty string")
    return value


def digest_of(data: Mapping[str, Any]) -> str:
    """The report's fingerprint, without its time and agent (so an identical node reports the same)."""
    body = {k: v for k, v in data.items() if k not in VOLATILE}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _cluster(data: Mapping[str, Any], sender: AbstractBaseUser | AnonymousUser) -> Cluster:
    name = _text(data, "cluster", "cluster")
    binding = AgentBinding.objects.select_related("cluster").filter(user_id=int(sender.pk or 0)).first()
    if binding is None and isinstance(sender, User) and role_of(sender) == AGENT:
        raise ReportForbidden("this agent account is bound to no cluster (create_user NAME --role agent --cluster C)")
    if binding is not None and binding.cluster.name != name:
        raise ReportForbidden(f"this agent token reports for cluster {binding.cluster.name} only, not {name}")
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ReportRefused("cluster", f"no cluster named {name!r}")
    return cluster


def _envelope(data: object, sender: AbstractBaseUser | AnonymousUser) -> tuple[Mapping[str, Any], Cluster, str,
                                                                                datetime]:
    """The report's kind, cluster (the sender may report for), node name and time, checked."""
    if not isinstance(data, Mapping):
        raise ReportRefused("non_field_errors", "a report is a JSON object")
    if data.get("kind") != REPORT_KIND:
        raise ReportRefused("kind", f"kind must be {REPORT_KIND!r}")
    cluster = _cluster(data, sender)
    name = _text(data, "node", "node")
    try:
        check_subdomain(name, "node name", "node")
    except OutOfBounds as exc:
        raise ReportRefused("node", str(exc)) from None
    try:
        when = parse_datetime(_text(data, "time", "time"))
    except ValueError:  # well formed but no such date or time (month 13)
        when = None
    if when is None or when.tzinfo is None:
        raise ReportRefused("time", "time must be an ISO 8601 date and time with its time zone, e.g. "
                                    "2026-01-31T12:00:00Z")
    return data, cluster, name, when


def parse(data: object, sender: AbstractBaseUser | AnonymousUser) -> _Parsed:
    """Check a report's every part with the engine's readers (ReportRefused naming the part at fault)."""
    data, cluster, name, when = _envelope(data, sender)
    topology = data.get("topology")
    if not isinstance(topology, Mapping):
        raise ReportRefused("topology", "topology must be the engine's topology JSON object")
    kubelet = data.get("kubelet")
    if not isinstance(kubelet, Mapping) or set(kubelet) - set(KUBELET_FILES) or not all(
            v is None or isinstance(v, str) for v in kubelet.values()):
        raise ReportRefused("kubelet", f"kubelet must be an object of {', '.join(KUBELET_FILES)}, each a text "
                                       "or null")
    for key in ("pci_devices", "notes"):
        if not isinstance(data.get(key, []), list):
            raise ReportRefused(key, f"{key} must be a list")
    files = {key: kubelet.get(key) for key in KUBELET_FILES}
    config, reservation = None, {}
    if files["config"] is not None:
        try:
            parsed = kubelet_file.parse(files["config"])
        except EngineError as exc:
            raise ReportRefused("kubelet.config", str(exc)) from None
        config, reservation = parsed.config, parsed.memory_reservation
    observed, device_numa, registered = _observed(files)
    return _Parsed(cluster, name, when, digest_of(data), dict(topology), config, reservation, files, observed,
                   device_numa, registered, data)


def _observed(files: Mapping[str, str | None]) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, int],
                                                         dict[str, list[str]]]:
    """What the checkpoints hold per (pod UID, container): CPUs, memory per NUMA node, devices; and the
    Device Manager's NUMA node per allocated device and registered devices per resource."""
    held: dict[tuple[str, str], dict[str, Any]] = {}

    def slot(key: tuple[str, str]) -> dict[str, Any]:
        return held.setdefault(key, {"cpus": "", "memory": {}, "devices": {}})

    def read(key: str, reader: Any) -> Any:
        text = files[key]
        try:
            return None if text is None else reader(text)
        except EngineError as exc:
            raise ReportRefused(f"kubelet.{key}", str(exc)) from None

    cpu = read("cpu_manager_state", cpu_state)
    for key, cpus in (cpu["entries"] if cpu else {}).items():
        slot(key)["cpus"] = str(cpus)
    memory = read("memory_manager_state", memory_state)
    for key, per_numa in (memory["entries"] if memory else {}).items():
        slot(key)["memory"] = {str(n): dict(r) for n, r in per_numa.items()}
    devices = read("device_checkpoint", device_state)
    for key, per_resource in (devices["entries"] if devices else {}).items():
        slot(key)["devices"] = per_resource
    return held, (devices["numa"] if devices else {}), (devices["registered"] if devices else {})


def _topology(parsed: _Parsed) -> Topology:
    """The reported topology, with the devices the Device Manager registered in place of the PCI devices of
    the same resource (their NUMA node as the checkpoint gives it, else none)."""
    document = dict(parsed.topology)
    if parsed.registered:
        kept = [d for d in document.get("devices") or [] if not (isinstance(d, Mapping)
                                                                   and d.get("resource") in parsed.registered)]
        document["devices"] = kept + [
            {"id": d, "resource": r, "numa": [parsed.device_numa[d]] if d in parsed.device_numa else None,
             "healthy": True, "name": d} for r, ids in sorted(parsed.registered.items()) for d in ids]
    try:
        return Topology.from_dict(document)
    except (EngineError, TypeError, KeyError, AttributeError, ValueError) as exc:
        raise ReportRefused("topology", services.topology_error(exc)) from None


def apply_report(data: object, sender: AbstractBaseUser | AnonymousUser) -> Outcome:
    """Apply one report (the module docstring): ReportRefused (400), ReportForbidden (403) or
    services.AllocationConflict (409) leave everything as it was."""
    envelope, cluster, name, when = _envelope(data, sender)
    now = timezone.now()
    last = NodeReport.objects.select_related("node").filter(node__cluster=cluster, node__name=name).first()
    if last is not None:
        wait = settings.NUMAWEB_AGENT_MIN_INTERVAL - (now - last.received_at).total_seconds()
        if wait > 0:
            raise ReportTooSoon(wait)
    # the steady state, most reports: the same as the last one, which was checked whole when it was applied.
    # Told apart by its digest before any lock is taken; one UPDATE, in no transaction of its own.
    if last is not None and last.node.removed_at is None and last.digest == digest_of(envelope):
        NodeReport.objects.filter(pk=last.pk).update(received_at=now, reported_at=when)
        last.received_at, last.reported_at = now, when
        return Outcome(last.node, changed=False, report=last)
    parsed = parse(data, sender)
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=parsed.cluster.pk).first()
        node = Node.objects.select_for_update().filter(cluster=parsed.cluster, name=parsed.name).first()
        last = NodeReport.objects.filter(node=node).first() if node is not None else None
        if node is not None and last is not None and last.digest == parsed.digest and node.removed_at is None:
            NodeReport.objects.filter(pk=last.pk).update(received_at=now, reported_at=parsed.time)
            last.received_at, last.reported_at = now, parsed.time
            return Outcome(node, changed=False, report=last)
        return _apply_changed(parsed, node, sender, now)


def _apply_changed(parsed: _Parsed, node: Node | None, sender: AbstractBaseUser | AnonymousUser,
                   now: datetime) -> Outcome:
    created = node is None
    if node is None:
        node = Node(cluster=parsed.cluster, name=parsed.name)
    topology = _topology(parsed)
    settings_now = services.kubelet_dict(node)
    if parsed.config is not None:
        settings_now.update(parsed.config.to_dict())
    try:
        config = KubeletConfig.from_dict(settings_now)
    except EngineError as exc:
        raise ReportRefused("kubelet.config", str(exc)) from None
    services.set_kubelet(node, config)
    services.set_topology(node, topology, "agent")
    node.removed_at = None
    named = dict((node.snapshot or {}).get("pods") or {})
    new = [Allocation(pod=named.get(uid, uid), container=container, cpus=held["cpus"], memory=held["memory"],
                      devices=held["devices"], origin=Allocation.OBSERVED, observed_at=parsed.time)
           for (uid, container), held in sorted(parsed.observed.items())]
    outcome = Outcome(node, changed=True, created=created, observed=len(new))
    try:
        services.to_engine(node, new)
    except EngineError as exc:
        raise ReportRefused("kubelet", f"the kubelet's checkpoints do not fit the reported topology: {exc}") from None
    dropped = _dropped(node, new, outcome)
    node.save()  # a stored node's generation advances
    _release_elsewhere(parsed.cluster, node, new, outcome)
    if dropped:
        services.release(Allocation.objects.filter(pk__in=[a.pk for a in dropped]))
    for a in new:
        a.node, a.cluster, a.job = node, parsed.cluster, jobs.job_for_pod(a.pod, parsed.cluster)
    Allocation.objects.bulk_create(new)
    dra.realign(node, topology)
    jobs.refresh_status({a.job_id for a in [*dropped, *new]})
    node.refresh_from_db()
    check = _check(node, parsed, named)
    outcome.report, _ = NodeReport.objects.update_or_create(node=node, defaults={
        "digest": parsed.digest, "reported_at": parsed.time, "received_at": now, "changed_at": now,
        "agent": _agent_text(parsed.data.get("agent")), "sender_id": sender.pk, "state_check": check,
        "disagreements": _disagreements(check), "pci_devices": list(parsed.data.get("pci_devices") or []),
        "notes": [str(n) for n in parsed.data.get("notes") or []][:100]})
    return outcome


def _dropped(node: Node, new: list[Allocation], outcome: Outcome) -> list[Allocation]:
    """The node's allocations the observed ones replace: earlier observed, imported and replayed ones, any
    of a pod the kubelet holds, and scheduled ones that no longer fit beside them."""
    if not node.pk:
        return []
    observed_pods = {a.pod for a in new}
    keep: list[Allocation] = []
    dropped: list[Allocation] = []
    for a in node.allocations.all().order_by("pk"):
        if a.origin != Allocation.SCHEDULED or a.pod in observed_pods:
            dropped.append(a)
            continue
        try:
            services.to_engine(node, [*new, *keep, a])
        except EngineError as exc:
            dropped.append(a)
            outcome.released.append(f"{a.pod}/{a.container}" if a.container else a.pod)
            outcome.notes.append(f"scheduled pod {a.pod} released: it no longer fits beside what the kubelet "
                                 f"holds ({exc})")
            continue
        keep.append(a)
    return dropped


def _release_elsewhere(cluster: Cluster, node: Node, new: list[Allocation], outcome: Outcome) -> None:
    """A pod the kubelet holds here holds nothing on another node of the cluster: released there."""
    elsewhere = Allocation.objects.filter(cluster=cluster, pod__in=sorted({a.pod for a in new})).exclude(node=node)
    gone = list(elsewhere.select_related("node"))
    if not gone:
        return
    services.hold_nodes({a.node_id for a in gone})
    for a in gone:
        outcome.notes.append(f"pod {a.pod} runs on {node.name} (its kubelet holds it): released from node "
                             f"{a.node.name} ({a.origin})")
        outcome.released.append(a.pod)
    services.release(elsewhere)
    jobs.refresh_status({a.job_id for a in gone})


def _check(node: Node, parsed: _Parsed, named: Mapping[str, str]) -> dict[str, Any]:
    """The state check's summary (empty without a cpu_manager_state): verdict, the disagreeing containers
    (by pod name when the last snapshot names the UID) and the reasons."""
    cpu_text = parsed.files["cpu_manager_state"]
    if cpu_text is None:
        return {}
    try:
        result = check_state(services.to_engine(node, []), cpu_text, parsed.files["memory_manager_state"],
                             memory_reservation=parsed.memory_reservation or None)
    except EngineError as exc:
        return {"verdict": f"the state check failed: {exc}", "match": False, "mismatches": 0, "reasons": [str(exc)],
                "containers": []}
    full = result.to_dict()
    containers = [{**c, "pod": named.get(c["pod"], c["pod"])} for c in full["containers"] if not c["match"]]
    return {"verdict": full["verdict"], "match": full["match"], "mismatches": full["mismatches"],
            "reasons": full["reasons"], "containers": containers, "checked": len(full["containers"])}


def _disagreements(check: Mapping[str, Any]) -> int:
    return int(check.get("mismatches") or 0) + len(check.get("reasons") or []) if check else 0


def _agent_text(agent: object) -> str:
    if isinstance(agent, Mapping):
        return " ".join(f"{k}={v}" for k, v in sorted(agent.items()))[:300]
    return str(agent or "")[:300]


def stale_after() -> timedelta:
    return timedelta(seconds=settings.NUMAWEB_AGENT_STALE_SECONDS)


def agent_status(report: NodeReport | None, now: datetime | None = None) -> dict[str, Any] | None:
    """What the pages and the API show of a node's agent: None for a node no agent reports; else when it
    last reported, whether it has gone silent (stale), and the state check's verdict and disagreements."""
    if report is None:
        return None
    now = now or timezone.now()
    check = report.state_check or {}
    return {
        "reported_at": report.reported_at, "received_at": report.received_at, "changed_at": report.changed_at,
        "stale": now - report.received_at > stale_after(), "stale_after_seconds": settings.NUMAWEB_AGENT_STALE_SECONDS,
        "agent": report.agent, "disagreements": report.disagreements, "pci_devices": report.pci_devices,
        "check": {"verdict": check.get("verdict", "no cpu_manager_state reported: nothing to check"),
                  "match": check.get("match", True), "disagreements": report.disagreements,
                  "reasons": check.get("reasons", []), "containers": check.get("containers", [])},
    }
