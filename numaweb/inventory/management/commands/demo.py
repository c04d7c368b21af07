"""`manage.py demo`: build the demo cluster and jobs (replacing an earlier demo)."""

from django.core.management.base import BaseCommand

from numaweb.commands import require_migrated_database
from numaweb.inventory.demo import build_demo


class Command(BaseCommand):
    help = "Create the demo cluster (seed 001's node-1/2/3 and more), allocations and jobs."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default="demo", help="cluster name (default: demo)")

    def handle(self, *args, cluster: str, **options):
        require_migrated_database()
        build_demo(cluster, self.stdout)
