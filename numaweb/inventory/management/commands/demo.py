"""`manage.py demo`: build the demo cluster and jobs (replacing an earlier demo); with --nodes, a
large cluster of real machine shapes and --pods pending pods (see numaweb/inventory/large_demo.py)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from numaweb.commands import require_migrated_database
from numaweb.inventory.demo import build_demo
from numaweb.inventory.large_demo import build_large_demo


def _count(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1000000, not {value}")
    return value


class Command(BaseCommand):
    help = ("Create the demo cluster (seed 001's node-1/2/3 and more), allocations and jobs; with --nodes N "
            "--pods M, a large cluster of real machine shapes and pending jobs totalling M pods.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", default=None, help="cluster name (default: demo, or large with --nodes)")
        parser.add_argument("--nodes", type=_count, default=None, help="build a large cluster of N nodes")
        parser.add_argument("--pods", type=_count, default=0, help="pending pods in the large cluster's jobs")
        parser.add_argument("--seed", type=int, default=1, help="random seed of the large cluster (default 1)")

    def handle(self, *args: Any, cluster: str | None, nodes: int | None, pods: int, seed: int, **options: Any) -> None:
        require_migrated_database()
        if nodes is None:
            if pods:
                raise CommandError("--pods needs --nodes (the small demo has its own jobs)")
            build_demo(cluster or "demo", self.stdout)
            return
        if nodes < 1:
            raise CommandError("--nodes must be at least 1")
        build_large_demo(cluster or "large", nodes, pods, seed, self.stdout)
