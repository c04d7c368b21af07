"""`manage.py serve [ADDR:PORT]`: run the product in one command.

Applies migrations, loads the demo data when the database has no cluster, makes sure an admin
account and its API token exist, starts a Celery worker as a child process (on the embedded
file-system queue unless REDIS_URL is set), then runs the web server. Stopping the server (Ctrl-C)
stops the worker."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token

from numaweb.inventory.demo import build_demo
from numaweb.inventory.models import Cluster


def worker_command(loglevel: str = "INFO") -> list[str]:
    """The worker the product runs: one process, sessions one at a time (SQLite-friendly)."""
    return [sys.executable, "-m", "celery", "-A", "numaweb", "worker", "--pool=solo", f"--loglevel={loglevel}",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"numaweb-{os.getpid()}@%h"]


class Command(BaseCommand):
    help = "Migrate, load demo data if empty, start a Celery worker and run the web server."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="do not start a worker (one runs elsewhere)")
        parser.add_argument("--no-demo", action="store_true", help="do not load demo data into an empty database")

    def handle(self, *args, addrport: str, no_worker: bool, no_demo: bool, **options):
        call_command("migrate", interactive=False, verbosity=0)
        if not no_demo and not Cluster.objects.exists():
            build_demo("demo", self.stdout)
        self._admin()
        worker = None
        # a SIGTERM (docker stop, systemd, kill) unwinds like Ctrl-C, so the worker is stopped too
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        if not no_worker:
            worker = subprocess.Popen(worker_command(), env=os.environ.copy())
            broker = "Redis" if settings.REDIS_URL else f"file system ({settings.BROKER_DIR})"
            self.stdout.write(f"worker pid {worker.pid} on {broker}")
        try:
            call_command("runserver", addrport, use_reloader=False, insecure_serving=True, use_threading=True)
        finally:
            if worker is not None and worker.poll() is None:
                worker.terminate()
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()

    def _admin(self) -> None:
        """An `admin` superuser (password from NUMAWEB_ADMIN_PASSWORD, else generated and kept in the data
        folder) and its API token, printed so the API can be tried at once."""
        User = get_user_model()
        user = User.objects.filter(username="admin").first()
        secret_file = settings.DATA_DIR / "admin_password"
        if user is None:
            password = os.environ.get("NUMAWEB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            user = User.objects.create_superuser("admin", "admin@localhost", password)
            if not os.environ.get("NUMAWEB_ADMIN_PASSWORD"):
                secret_file.write_text(password)
                secret_file.chmod(0o600)
        token, _ = Token.objects.get_or_create(user=user)
        where = f" (password in {secret_file})" if secret_file.exists() else ""
        self.stdout.write(f"admin user: admin{where}; API token: {token.key}")
