"""`manage.py screenshots [--output docs/screenshots] [--cluster demo] [--node srv-gpu-1]`.

Serves the pages from this process on a free loopback port, drives Debian's Chromium through
Playwright (never a downloaded browser) and writes PNGs of the dashboard, a node page, a session
page, the cluster map (`--map-cluster`, e.g. a `demo --nodes 5000` one), a pod search, a comparison page
and the dashboard answering a headroom question. Builds the demo cluster
when it is missing, and runs a dry-run session and a comparison of the three profiles in-process
when the cluster has none, so `manage.py migrate && manage.py screenshots` is enough."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.hashers import make_password
from django.core.management.base import BaseCommand, CommandError, CommandParser

from numaweb.access.roles import OPERATOR, set_role
from numaweb.access.sessions import session_cookie
from numaweb.comparisons import services as comparison_services
from numaweb.comparisons.models import Comparison
from numaweb.inventory.demo import build_demo
from numaweb.inventory.models import Cluster, Node
from numaweb.jobs.models import Job
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession
from scheduler_core.scheduler.compare import Shape, Variant
from scheduler_core.scheduler.profiles import PROFILES

if TYPE_CHECKING:  # Playwright is a dev dependency, imported when the command runs
    from playwright.sync_api import Browser

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


HEADROOM_QUERY = "?hr-cpu=4&hr-memory=8Gi&hr-devices=nvidia.com%2Fgpu%3D1&hr-policy=single-numa-node&hr-profile=aligned"


def take_screenshots(browser: Browser, base_url: str, node: Node, session: SchedulingSession, output: Path,
                     width: int = 1366, comparison: Comparison | None = None, *, user: AbstractBaseUser,
                     map_cluster: Cluster | None = None) -> list[Path]:
    """Open the pages in `browser` (a Playwright Browser) logged in as `user` and write dashboard/node/session
    PNGs, the cluster map and the jobs page (of `map_cluster`, else the node's cluster) and a pod search, and
    with a finished `comparison` its page and the dashboard answering a headroom question."""
    output.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.add_cookies([session_cookie(user, base_url)])
    page = context.new_page()
    pod = session.placements.filter(job="vj-test").first() or session.placements.order_by("index").first()
    big = map_cluster.pk if map_cluster else node.cluster_id
    shots = [("dashboard.png", "/", None), ("node.png", f"/nodes/{node.pk}/", "#grid"),
             ("session.png", f"/sessions/{session.pk}/" + (f"?pod={pod.index}" if pod else ""), "#hint-table"),
             ("cluster-map.png", f"/clusters/{big}/map", "#cluster-map rect[data-id]"),  # drawn by its script
             ("jobs.png", f"/jobs/?cluster={big}", "#job-filters"),
             ("pod-search.png", "/pods/?q=default", "table.pod-matches")]
    if comparison is not None:
        shots += [("comparison.png", f"/comparisons/{comparison.pk}/", "svg[data-chart=heat]"),
                  ("headroom.png", "/" + HEADROOM_QUERY, "[data-headroom]")]
    written = []
    try:
        for name, path, ready in shots:
            page.goto(base_url.rstrip("/") + path)
            if ready:
                page.wait_for_selector(ready)
            page.wait_for_load_state("networkidle")  # what the page loads on demand (a comparison's heat strips)
            target = output / name
            page.screenshot(path=str(target), full_page=True)
            written.append(target)
    finally:
        context.close()
    return written


class _Server:
    """The project's WSGI app on 127.0.0.1:<free port>, in a daemon thread. Static files are the
    product's own: collected first, then served by WhiteNoise under their hashed names (as `serve` does)."""

    def __enter__(self) -> str:
        from django.core.management import call_command
        from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
        from django.core.wsgi import get_wsgi_application

        call_command("collectstatic", interactive=False, verbosity=0)

        class Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet, allow_reuse_address=False)
        self.server.set_app(get_wsgi_application())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class Command(BaseCommand):
    help = ("Write PNG screenshots of the dashboard, a node page, a session page, a comparison and the headroom "
            "box (demo data) for the docs.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", default=str(Path(settings.BASE_DIR) / "docs" / "screenshots"))
        parser.add_argument("--cluster", default="demo")
        parser.add_argument("--node", default="srv-gpu-1", help="node for node.png (default: srv-gpu-1)")
        parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
        parser.add_argument("--width", type=int, default=1366)
        parser.add_argument("--map-cluster", default="", help="cluster for cluster-map.png (default: --cluster)")

    def handle(self, *args: Any, output: str, cluster: str, node: str, chromium: str, width: int, map_cluster: str,
               **options: Any) -> None:
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
            session = services.create_session(target, "volcano", True, list(Job.objects.filter(cluster=target)))
            session = services.execute_session(session.pk)
            if session.status != SchedulingSession.DONE:
                raise CommandError(f"session {session.pk} failed: {session.error}")
        comparison = self._comparison(target)
        # the pages need a login: an operator account of its own (no password) shows what an operator sees
        user, _ = get_user_model().objects.get_or_create(username="screenshots",
                                                         defaults={"password": make_password(None)})
        set_role(user, OPERATOR)
        os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # sync Playwright runs an event loop here
        from playwright.sync_api import sync_playwright

        with _Server() as base_url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=ARGS)
            try:
                written = take_screenshots(browser, base_url, row, session, Path(output), width, comparison,
                                           user=user, map_cluster=Cluster.objects.filter(name=map_cluster).first())
            finally:
                browser.close()
        for path in written:
            self.stdout.write(f"wrote {path}")

    @staticmethod
    def _comparison(cluster: Cluster) -> Comparison:
        """The cluster's latest finished comparison, else the three profiles compared in this process."""
        done = Comparison.objects.filter(cluster=cluster, finished_at__isnull=False).order_by("-id")
        for comparison in done:
            if comparison.status == Comparison.DONE:
                return comparison
        comparison = comparison_services.create_comparison(cluster, [Variant(p) for p in PROFILES],
                                                           Job.objects.filter(cluster=cluster),
                                                           Shape.parse("4", "8Gi", policy="single-numa-node"))
        for variant in comparison.variants.all():
            comparison_services.execute_variant(variant.pk)
        comparison = Comparison.objects.get(pk=comparison.pk)
        if comparison.status != Comparison.DONE:
            raise CommandError(f"comparison {comparison.pk} failed: "
                               + "; ".join(v.error for v in comparison.variants.all() if v.error))
        return comparison
