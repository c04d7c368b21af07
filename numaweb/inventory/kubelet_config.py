"""A node's kubelet settings from and to its KubeletConfiguration file (`/var/lib/kubelet/config.yaml`;
the format is the engine's: `scheduler_core.formats.kubelet_config`)."""

from __future__ import annotations

from django.db import transaction

from scheduler_core.formats import dump_kubelet_config, load_kubelet_config
from scheduler_core.formats.kubelet_config import KubeletFile

from . import services
from .checks import _text
from .models import Node


def parse(data: bytes | str) -> KubeletFile:
    """The file's settings; `FormatError` naming the field on anything the kubelet would refuse."""
    loaded: KubeletFile = load_kubelet_config(_text(data, "kubelet config"))
    return loaded


def apply(node: Node, data: bytes | str) -> Node:
    """Set the node's kubelet settings from a KubeletConfiguration, in one transaction holding the node:
    the node's topology and allocations must still fit the new settings (the engine's error otherwise,
    and nothing changes)."""
    parsed = parse(data)
    with transaction.atomic():
        row = Node.objects.select_for_update().get(pk=node.pk)
        services.set_kubelet(row, parsed.config)
        services.validate_node(row)
        row.save()  # its generation advances
    row.refresh_from_db()
    return row


def export(node: Node) -> str:
    """The node's settings as a KubeletConfiguration YAML (the NUMA-related fields only)."""
    return dump_kubelet_config(services.kubelet_of(node))
