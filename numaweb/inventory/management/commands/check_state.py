"""`manage.py check_state NODE --cpu-state FILE [--memory-state FILE] [--pods FILE] [--kubelet-config FILE]
[--cluster C]` (the CPU state may also be given as the second argument): replay a node's real kubelet
state through the engine's kubelet model and print, per container, predicted versus actual CPUs (and
memory), then the verdict; then whether a kubelet with the node's settings, or with the planned
KubeletConfiguration, would start with these files, and if not why and what to do. Exit 0 when
everything matches and the kubelet starts, 3 when something does not match, 4 when the kubelet would
refuse to start, 1 on bad input."""

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from numaweb.commands import require_migrated_database
from numaweb.inventory import checks
from numaweb.inventory.models import Node
from scheduler_core.errors import EngineError

MISMATCH_EXIT = 3
REFUSED_EXIT = 4


def _read(path: str | None) -> bytes | None:
    return None if path is None else _read_file(path)


def _read_file(path: str) -> bytes:
    p = Path(path)
    if not p.is_file():
        raise CommandError(f"{path}: no such file")
    return p.read_bytes()


class Command(BaseCommand):
    help = "Check a node's cpu_manager_state (and memory_manager_state) against the engine's kubelet model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("node", help="node name (or id)")
        parser.add_argument("cpu_state", nargs="?", default=None, help="the same as --cpu-state")
        parser.add_argument("--cpu-state", dest="cpu_state_option", default=None,
                            help="the node's /var/lib/kubelet/cpu_manager_state")
        parser.add_argument("--kubelet-config", default=None,
                            help="a planned /var/lib/kubelet/config.yaml (KubeletConfiguration): would the kubelet "
                                 "start with it? (default: the node's settings)")
        parser.add_argument("--memory-state", default=None, help="/var/lib/kubelet/memory_manager_state")
        parser.add_argument("--pods", default=None,
                            help="the node's pods (kubectl get pods -o yaml), in admission order")
        parser.add_argument("--cluster", default=None, help="the node's cluster, when the name is not unique")

    def handle(self, *args: Any, node: str, cpu_state: str | None, cpu_state_option: str | None,
               memory_state: str | None, pods: str | None, kubelet_config: str | None, cluster: str | None,
               **options: Any) -> None:
        require_migrated_database()
        if cpu_state and cpu_state_option and cpu_state != cpu_state_option:
            raise CommandError("give the cpu_manager_state once (--cpu-state or the second argument)")
        cpu_state = cpu_state or cpu_state_option
        if cpu_state is None:
            raise CommandError("--cpu-state FILE is required (the node's /var/lib/kubelet/cpu_manager_state)")
        rows = Node.objects.filter(name=node)
        if cluster:
            rows = rows.filter(cluster__name=cluster)
        if not rows.exists() and node.isdigit():
            rows = Node.objects.filter(pk=int(node))
        if rows.count() != 1:
            problem = "not found" if not rows.exists() else "in several clusters; give --cluster"
            raise CommandError(f"node {node!r}: {problem}")
        try:
            result = checks.check_node_state(rows.get(), _read_file(cpu_state), _read(memory_state), _read(pods),
                                             _read(kubelet_config))
        except EngineError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"node {result.node}: replayed in order of {result.order}; state file policy "
                          f"{result.file_policy}")
        for c in result.containers:
            mark = "ok      " if c.match else "MISMATCH"
            line = (f"  {mark} {c.pod}/{c.container}: predicted {c.predicted_cpus or '-'}, "
                    f"actual {c.actual_cpus or '-'}")
            if c.actual_memory is not None:
                line += f"; memory predicted {_mem(c.predicted_memory)}, actual {_mem(c.actual_memory)}"
            if c.why:
                line += f" ({c.why})"
            self.stdout.write(line)
        self.stdout.write(f"verdict: {result.verdict}")
        start = result.start
        if start is None:  # check_node_state always judges the start
            raise CommandError(f"node {result.node}: no kubelet start verdict")
        for name, (before, after) in result.planned.items():
            self.stdout.write(f"planned change: {name} {before or '-'} -> {after or '-'}")
        self.stdout.write(f"kubelet start: {'starts' if start.starts else 'REFUSES'}: {start.summary}")
        if not start.starts:
            if start.refusal is not None:
                self.stdout.write(f"  next step: {start.refusal.action}")
            if start.pods_to_move:
                self.stdout.write(f"  pinned pods that leave the node: {', '.join(start.pods_to_move)}")
            sys.exit(REFUSED_EXIT)
        if result.mismatches or result.reasons:
            sys.exit(MISMATCH_EXIT)


def _mem(memory: Mapping[int, Mapping[str, int]] | None) -> str:
    if not memory:
        return "-"
    return ", ".join(f"NUMA {n}: " + " ".join(f"{r}={b}" for r, b in sorted(res.items()))
                     for n, res in sorted(memory.items()))
