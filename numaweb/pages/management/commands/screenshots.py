"""`manage.py screenshots [--output docs/screenshots] [--cluster demo] [--node srv-gpu-1]`.

Serves the pages from this process on a free loopback port, drives Debian's Chromium through
Playwright (never a downloaded browser) and writes PNGs of the dashboard, a node page and a session
page. Builds the demo cluster when it is missing and runs a dry-run session in-process when the
cluster has none, so `manage.py migrate && manage.py screenshots` is enough."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from numaweb.inventory.demo import build_demo
from numaweb.inventory.models import Cluster, Node
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def take_screenshots(browser, base_url: str, node: Node, session: SchedulingSession, output: Path,
                     width: int = 1366) -> list[Path]:
    """Open the pages in `browser` (a Playwright Browser) and write dashboard/node/session PNGs."""
    output.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    pod = session.placements.filter(job="vj-test").first() or session.placements.order_by("index").first()
    shots = [("dashboard.png", "/", None), ("node.png", f"/nodes/{node.pk}/", "#grid"),
             ("session.png", f"/sessions/{session.pk}/" + (f"?pod={pod.index}" if pod else ""), "#hint-table")]
    written = []
    try:
        for name, path, ready in shots:
            page.goto(base_url.rstrip("/") + path)
            if ready:
                page.wait_for_selector(ready)
            target = output / name
            page.screenshot(path=str(target), full_page=True)
            written.append(target)
    finally:
        context.close()
    return written


class _Server:
    """The project's WSGI app (plus static files) on 127.0.0.1:<free port>, in a daemon thread."""

    def __enter__(self) -> str:
        from django.contrib.staticfiles.handlers import StaticFilesHandler
        from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
        from django.core.wsgi import get_wsgi_application

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args) -> None:
                pass

        self.server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet, allow_reuse_address=False)
        self.server.set_app(StaticFilesHandler(get_wsgi_application()))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class Command(BaseCommand):
    help = "Write PNG screenshots of the dashboard, a node page and a session page (demo data) for the docs."

    def add_arguments(self, parser):
        parser.add_argument("--output", default=str(Path(settings.BASE_DIR) / "docs" / "screenshots"))
        parser.add_argument("--cluster", default="demo")
        parser.add_argument("--node", default="srv-gpu-1", help="node for node.png (default: srv-gpu-1)")
        parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
        parser.add_argument("--width", type=int, default=1366)

    def handle(self, *args, output, cluster, node, chromium, width, **options):
        if not Path(chromium).exists():
            raise CommandError(f"{chromium} not found: install Debian's chromium (apt-get install chromium)")
        target = Cluster.objects.filter(name=cluster).first() or build_demo(cluster, self.stdout)
        row = (Node.objects.filter(cluster=target, name=node).first()
               or Node.objects.filter(cluster=target).order_by("-num_cpus").first())
        if row is None:
            raise CommandError(f"cluster {target.name} has no node")
        done = SchedulingSession.objects.filter(cluster=target, status=SchedulingSession.DONE)
        session = done.order_by("-id").first()
        if session is None:  # a dry run in this process: allocations stay as they are
            session = SchedulingSession.objects.create(cluster=target, profile="volcano", dry_run=True)
            session.jobs.set(Job.objects.all())
            session = services.execute_session(session.pk)
            if session.status != SchedulingSession.DONE:
                raise CommandError(f"session {session.pk} failed: {session.error}")
        os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # sync Playwright runs an event loop here
        from playwright.sync_api import sync_playwright

        with _Server() as base_url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=ARGS)
            try:
                written = take_screenshots(browser, base_url, row, session, Path(output), width)
            finally:
                browser.close()
        for path in written:
            self.stdout.write(f"wrote {path}")
