"""`manage.py import_topology FILE... [--cluster C] [--format F] [--name N] [--kubelet-config config.yaml]`:
create or replace nodes from topology files in any format the engine reads, with the kubelet settings of
a KubeletConfiguration when given (the policy flags override it). All files or none are imported."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from numaweb.commands import engine_message, plural, require_migrated_database
from numaweb.inventory import kubelet_config as settings
from numaweb.inventory import services
from numaweb.inventory.models import Cluster
from scheduler_core.errors import EngineError


class Command(BaseCommand):
    help = "Import node topologies (hwloc XML, lscpu, numactl, sysfs tarball, NRT, Numatopology, engine JSON…)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", help="topology files; the node is named after the file")
        parser.add_argument("--cluster", default="default", help="cluster to import into (created if missing)")
        parser.add_argument("--format", default=None, help="input format (default: detected from the content)")
        parser.add_argument("--name", default=None, help="node name (only with a single file)")
        parser.add_argument("--topology-manager-policy", default=None)
        parser.add_argument("--topology-manager-scope", default=None)
        parser.add_argument("--cpu-manager-policy", default=None)
        parser.add_argument("--kubelet-config", default=None,
                            help="the nodes' /var/lib/kubelet/config.yaml (KubeletConfiguration)")

    def handle(self, *args: Any, files: list[str], cluster: str, format: str | None, name: str | None,
               kubelet_config: str | None, **options: Any) -> None:
        require_migrated_database()
        if name and len(files) > 1:
            raise CommandError("--name needs exactly one file")
        kubelet = {}
        if kubelet_config:
            path = Path(kubelet_config)
            if not path.is_file():
                raise CommandError(f"{kubelet_config}: no such file")
            try:
                kubelet = settings.parse(path.read_bytes()).config.to_dict()
            except EngineError as exc:
                raise CommandError(f"{kubelet_config}: {exc}") from exc
        kubelet.update({k: options[k] for k in ("topology_manager_policy", "topology_manager_scope",
                                                 "cpu_manager_policy") if options.get(k)})
        with transaction.atomic():
            target, _ = Cluster.objects.get_or_create(name=cluster)
            for file in files:
                path = Path(file)
                if not path.is_file():
                    raise CommandError(f"{file}: no such file")
                node_name = name or path.name.split(".")[0]
                try:
                    node = services.import_node(target, node_name, path.read_bytes(), format, kubelet)
                except (EngineError, UnicodeDecodeError) as exc:
                    raise CommandError(f"{file}: {engine_message(exc)}") from exc
                self.stdout.write(f"{target.name}/{node.name}: {plural(node.num_cpus, 'CPU')}, "
                                  f"{plural(node.num_numa_nodes, 'NUMA node')} ({node.source_format})")
                for note in node.import_notes:
                    self.stdout.write(f"  note: {note}")
