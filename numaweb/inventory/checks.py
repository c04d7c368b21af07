"""A node's real kubelet state files checked against the engine's kubelet model (the comparison is
the engine's: `scheduler_core.kubelet.state_check`). Read-only: nothing is written."""

from __future__ import annotations

from scheduler_core.formats.snapshot import load_pods
from scheduler_core.kubelet.state_check import StateCheck, check_state

from . import services
from .models import Node


def _text(data: bytes | str, what: str) -> str:
    from scheduler_core.errors import FormatError
    from scheduler_core.formats._common import MAX_INPUT_BYTES

    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_INPUT_BYTES:
        raise FormatError(f"{what}: larger than the {MAX_INPUT_BYTES >> 20} MiB limit")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{what}: not UTF-8 text (byte {exc.start})") from None


def check_node_state(node: Node, cpu_state: bytes | str, memory_state: bytes | str | None = None,
                     pods: bytes | str | None = None) -> StateCheck:
    """Replay the state file's containers (or `pods`, in admission order) on the node's topology and
    kubelet settings; the node's stored allocations are not used."""
    engine = services.to_engine(node, ())
    pod_list = load_pods(pods.encode() if isinstance(pods, str) else bytes(pods)) if pods else None
    return check_state(engine, _text(cpu_state, "cpu_manager_state"),
                       _text(memory_state, "memory_manager_state") if memory_state else None, pod_list)
