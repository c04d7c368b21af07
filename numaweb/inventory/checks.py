"""What a node's kubelet would do, asked of the engine's kubelet model: admit a pod (`what_if`), match its real
state files (`check_node_state`) and start with the node's settings or a planned KubeletConfiguration (the
comparison and the start-up verdict are the engine's: `scheduler_core.kubelet.state_check`,
`scheduler_core.kubelet.kubelet_start`); and the size limits the front ends hold uploads to.
Read-only: nothing is written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from scheduler_core.errors import EngineError, FormatError, PolicyError
from scheduler_core.formats import MAX_INPUT_BYTES, load_kubelet_config
from scheduler_core.formats.snapshot import MAX_SNAPSHOT_BYTES, load_pods
from scheduler_core.kubelet.admission import AdmitResult, admit_pod
from scheduler_core.kubelet.state_check import StateCheck, check_state
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node as EngineNode
from scheduler_core.model.pods import Pod

from . import services
from .models import Node

#: the largest uploads the front ends read, refused above with a field error before a byte is read: a file the
#: engine imports (a topology, a kubelet state or settings file: the engine's own limit) and a cluster snapshot
FILE_UPLOAD_LIMIT = MAX_INPUT_BYTES
SNAPSHOT_UPLOAD_LIMIT = MAX_SNAPSHOT_BYTES


def what_if(node: EngineNode, pod: Pod) -> AdmitResult:
    """How the node's kubelet would admit `pod` now (its hints, the merge, the CPUs it would get), keeping
    nothing: the node page's what-if."""
    return admit_pod(node, pod, commit=False)


def _text(data: bytes | str, what: str) -> str:

    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_INPUT_BYTES:
        raise FormatError(f"{what}: larger than the {MAX_INPUT_BYTES >> 20} MiB limit")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{what}: not UTF-8 text (byte {exc.start})") from None


def check_node_state(node: Node, cpu_state: bytes | str, memory_state: bytes | str | None = None,
                     pods: bytes | str | None = None, kubelet_config: bytes | str | None = None,
                     planned_settings: Mapping[str, Any] | None = None) -> StateCheck:
    """Replay the state file's containers (or `pods`, in admission order) on the node's topology and
    kubelet settings, and judge the kubelet's start with them under the node's settings or a planned
    configuration: `kubelet_config` (a KubeletConfiguration) and/or `planned_settings` (settings by their
    engine names, over the file's or the node's). The node's stored allocations are not used."""
    engine = services.to_engine(node, ())
    pod_list = load_pods(pods.encode() if isinstance(pods, str) else bytes(pods)) if pods else None
    try:
        parsed = load_kubelet_config(_text(kubelet_config, "kubelet config")) if kubelet_config else None
    except EngineError as exc:
        raise FormatError(str(exc), "kubelet_config") from exc
    planned = parsed.config if parsed else None
    if planned_settings:
        base = (planned or engine.kubelet).to_dict()
        try:
            planned = KubeletConfig.from_dict({**base, **planned_settings})
        except EngineError as exc:
            # the field says it is the planned settings, and which one: "planned_settings:reserved_cpus"
            raise PolicyError(str(exc), f"planned_settings:{exc.field or ''}") from exc
    return check_state(engine, _text(cpu_state, "cpu_manager_state"),
                       _text(memory_state, "memory_manager_state") if memory_state else None, pod_list,
                       planned, parsed.memory_reservation if parsed else None,
                       max_containers=settings.NUMAWEB_MAX_STATE_CONTAINERS)


def pods_on_node(node: Node) -> list[str]:
    """The pods the inventory has on the node (a drain evicts every one of them)."""
    return sorted(set(node.allocations.values_list("pod", flat=True)))
