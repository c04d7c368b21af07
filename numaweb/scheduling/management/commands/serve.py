"""`manage.py serve [ADDR:PORT]`: run the product in one command, the way docker-compose runs it.

Applies migrations, collects the static files (unless they did not change since the last run), loads the demo
data when the database has no cluster, makes sure an admin account and its API token exist, then starts two
children: gunicorn with numaweb.gunicorn_conf, the compose web service's server (WhiteNoise serves the static
files, DEBUG stays off), and a Celery worker kept running by numaweb.worker.supervisor (restarted when it exits,
killed and replaced when it hangs; its runs queued again at once).

The web server exiting, Ctrl-C or SIGTERM stop both."""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from numaweb import metrics_store
from numaweb.access.tokens import current_token
from numaweb.inventory.demo import build_demo
from numaweb.inventory.models import Cluster
from numaweb.worker.supervisor import Supervisor, stop


def static_fingerprint() -> str:
    """Every static source file's path, size and modification time, hashed: collectstatic runs only when this
    changed since the last run (its manifest is there too), which saves most of a warm start."""
    from django.contrib.staticfiles import finders

    digest = hashlib.sha256()
    for finder in finders.get_finders():
        for path, storage in finder.list([]):
            stat = os.stat(storage.path(path))
            digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def collect_static() -> bool:
    """collectstatic unless the sources are those of the last run; True when it ran."""
    from django.contrib.staticfiles.storage import staticfiles_storage

    root = Path(settings.STATIC_ROOT)
    stamp = root / ".sources"  # written after a collectstatic: the sources it collected
    manifest = getattr(staticfiles_storage, "manifest_name", None)  # hashed names need their manifest too
    fingerprint = static_fingerprint()
    if stamp.exists() and stamp.read_text() == fingerprint and (manifest is None or (root / manifest).exists()):
        return False
    call_command("collectstatic", interactive=False, verbosity=0)
    stamp.write_text(fingerprint)
    return True


def web_command(bind: str) -> list[str]:
    """gunicorn exactly as the compose web service runs it, on `bind`."""
    return [sys.executable, "-m", "gunicorn", "-c", "python:numaweb.gunicorn_conf", "--bind", bind, "numaweb.asgi"]


def parse_addrport(addrport: str) -> str:
    """runserver's forms: PORT, ADDR:PORT, [IPv6]:PORT."""
    addr, _, port = addrport.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError(f"{addrport!r} is not a port or address:port")
    return f"{addr or '127.0.0.1'}:{port}"


class Command(BaseCommand):
    help = "Migrate, collect static files, load demo data if empty, then run gunicorn and a supervised worker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="do not start a worker (one runs elsewhere)")
        parser.add_argument("--no-demo", action="store_true", help="do not load demo data into an empty database")

    def handle(self, *args: Any, addrport: str, no_worker: bool, no_demo: bool, **options: Any) -> None:
        bind = parse_addrport(addrport)
        # metrics of servers that are gone (numaweb.metrics_store): first, so a disk they filled is free to migrate
        metrics_store.sweep(metrics_store.base_folder())
        call_command("migrate", interactive=False, verbosity=0)
        collect_static()
        if not no_demo and not Cluster.objects.exists():
            build_demo("demo", self.stdout)
        self._admin()
        connection.close()
        self.stopping = False

        def asked_to_stop(*_args: object) -> None:
            self.stopping = True

        # Ctrl-C and SIGTERM (docker stop, systemd, kill) end the loop below, which stops both children
        signal.signal(signal.SIGINT, asked_to_stop)
        signal.signal(signal.SIGTERM, asked_to_stop)
        web = subprocess.Popen(web_command(bind), env=os.environ.copy())
        self.stdout.write(f"web server (gunicorn) pid {web.pid} at http://{bind}/")
        supervisor = Supervisor(self._say)
        try:
            if not no_worker:
                supervisor.start_worker()
            code = supervisor.supervise(web, lambda: self.stopping)
        finally:
            stop(web)
            supervisor.stop()
        if code:
            raise CommandError(f"the web server exited with code {code}", returncode=code)

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _admin(self) -> None:
        """An `admin` superuser (role admin; password from NUMAWEB_ADMIN_PASSWORD, else generated and kept in
        the data folder), its login and API token printed so the pages and the API can be tried at once."""
        User = get_user_model()
        user = User.objects.filter(username="admin").first()
        secret_file = settings.DATA_DIR / "admin_password"
        if user is None:
            password = os.environ.get("NUMAWEB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            user = User.objects.create_superuser("admin", "admin@localhost", password)
            if not os.environ.get("NUMAWEB_ADMIN_PASSWORD"):
                secret_file.write_text(password)
                secret_file.chmod(0o600)
        token = current_token(user)
        if secret_file.exists():
            login = f"admin / {secret_file.read_text().strip()} (kept in {secret_file})"
        else:
            login = "admin / the password you set (NUMAWEB_ADMIN_PASSWORD, or changed since)"
        self.stdout.write(f"admin login: {login}; API token: {token.key}")
