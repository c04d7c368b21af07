"""The web product at scale: 5,000 nodes, 10,000 pods, 0 → 50 stored sessions.

    python benchmarks/web_scale.py                       # 5,000 nodes x 10,000 pods, 3 sessions run
    python benchmarks/web_scale.py --nodes 1000 --pods 2000 --runs 2 --stored 10
    python benchmarks/web_scale.py --jobs-only --pods 61000   # the jobs page at ~22,000 jobs, no worker
    python benchmarks/web_scale.py --every-page --pods 61000  # every page and API list, 20 comparisons

In a scratch data folder (SQLite, file-system queue): `manage.py demo --nodes N --pods M`, then a real
Celery worker process (the one `manage.py serve` starts). Pages and API calls go through Django's test
client in this process (median and fastest of --repeat warm calls; the dashboard's first, cold call is printed
too). Sessions are dry runs submitted with `start_session` and run by the worker; submit → done is
wall time until the row says done, the engine's share is the worker's `engine_ms` over it. Stored
sessions beyond the --runs that ran are copies of the first session's result rows (same sizes, new
session ids), since what is measured is how pages behave with many stored results, not the engine.
Bytes per pod are the SQLite pages of the result tables (dbstat) per pod of one session.
The jobs page (one page of 50 jobs: the first, the 40th, filtered by status and name, the list alone over
HTMX) and the API's job list are measured against the first session's page, with their sizes; --jobs-only
measures only those, against a dry run of the cluster's first --session-jobs jobs run in this process.
--every-page (no worker: everything runs in this process) adds a dry run of each profile and --comparisons stored
comparisons of the three profiles with a headroom shape (one run, the rest copies), then asks every GET route of
the URLconf (`every_route`: each detail id a real one) and a few query variants through the WSGI application
(`numaweb.wsgi`, every middleware, a logged-in admin's session cookie, `Accept-Encoding: gzip` as a browser or
`curl --compressed` sends it) and prints path, status, the bytes on the wire and decoded, the first call's ms,
the median and fastest wall ms and the median CPU ms of --repeat more (a download is timed once);
--data DIR builds into DIR once and reuses it on later runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT_TABLES = ("scheduling_placement", "scheduling_verdict", "scheduling_verdictgroup", "scheduling_nodenames",
                 "scheduling_detail", "scheduling_sessionjob")


def setup(data_dir: Path) -> None:
    os.environ.update(NUMAWEB_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="numaweb.settings")
    for name in ("REDIS_URL", "DATABASE_URL"):
        os.environ.pop(name, None)
    sys.path.insert(0, str(ROOT))
    import django

    from numaweb.startup import prepare

    prepare()  # the data folder, queue folder and secret key (settings never write)
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # the pages link hashed static files


def timed(fn, repeat: int) -> tuple[tuple[float, float], object]:
    """(median, fastest) of `repeat` calls, and the last call's result. The fastest call is the work
    itself; the median also holds what the shared machine did meanwhile."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return (statistics.median(times), min(times)), out


def result_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        marks = ",".join(["%s"] * len(RESULT_TABLES))  # tables and their indexes
        cur.execute(f"SELECT SUM(pgsize) FROM dbstat WHERE name IN "
                    f"(SELECT name FROM sqlite_master WHERE tbl_name IN ({marks}))", RESULT_TABLES)
        return cur.fetchone()[0] or 0


def run_session(cluster, profile: str) -> tuple[object, float]:
    from numaweb.scheduling import services
    from numaweb.scheduling.models import SchedulingSession

    start = time.perf_counter()
    session = services.start_session(cluster, profile, dry_run=True)
    while True:
        time.sleep(0.05)  # a fine poll: its granularity is part of submit → done
        session = SchedulingSession.objects.get(pk=session.pk)
        if session.finished:
            break
    wall = time.perf_counter() - start
    if session.status != SchedulingSession.DONE:
        raise SystemExit(f"session {session.pk} {session.status}: {session.error}")
    return session, wall


def wait_for_worker(worker: subprocess.Popen, timeout: float = 120) -> None:
    """Until the worker's housekeeping has published its heartbeat: a user submits to a running worker,
    so its start-up is not part of submit → done."""
    from numaweb.health import workers_alive

    deadline = time.monotonic() + timeout
    while not workers_alive():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the worker did not start (see worker.log in the scratch folder, --keep)")
        time.sleep(0.2)


def clone(session) -> None:
    """A new session row with a copy of `session`'s result rows (raw SQL: INSERT ... SELECT)."""
    from django.db import connection, transaction

    from numaweb.scheduling.models import SchedulingSession

    with transaction.atomic():
        copy = SchedulingSession.objects.get(pk=session.pk)
        copy.pk = None
        copy.save()
        copy.jobs.set(session.jobs.all())
        with connection.cursor() as cur:
            for table in RESULT_TABLES:
                cur.execute(f"PRAGMA table_info({table})")
                cols = [row[1] for row in cur.fetchall() if row[1] not in ("id", "session_id")]
                names = ", ".join(f'"{c}"' for c in cols)
                cur.execute(f'INSERT INTO {table} (session_id, {names}) SELECT %s, {names} FROM {table} '
                            f"WHERE session_id = %s", [copy.pk, session.pk])


def measure(client, session, repeat: int) -> dict[str, tuple[float, float]]:
    from numaweb.scheduling.models import Placement

    index = Placement.objects.filter(session=session).exclude(status="admitted").values_list("index", flat=True)
    index = index.first() if index.exists() else 0
    urls = {"dashboard": "/", "sessions list": "/sessions/", "API session list": "/api/sessions/?page_size=10",
            "session page": f"/sessions/{session.pk}/",
            "pod hint table": f"/sessions/{session.pk}/pods/{index}/hints"}
    out = {}
    for what, url in urls.items():
        t, response = timed(lambda url=url: client.get(url), repeat)
        assert response.status_code == 200, (url, response.status_code)
        out[what] = t
    return out


def jobs_pages(client, cluster, session, repeat: int) -> None:
    """The jobs page against the session page of `session` (the reference the issue set) and the sessions
    list: server time (median / fastest of `repeat`), size, and the ratio to the session page."""
    from numaweb.jobs.models import Job

    jobs = Job.objects.filter(cluster=cluster)
    total = jobs.count()
    name = jobs.order_by("id").values_list("name", flat=True)[total // 2]
    urls = {"session page": f"/sessions/{session.pk}/", "sessions list": "/sessions/",
            "jobs page": f"/jobs/?cluster={cluster.pk}", "jobs page, page 40": f"/jobs/?cluster={cluster.pk}&page=40",
            "jobs page, name filter": f"/jobs/?cluster={cluster.pk}&status=pending&q={name}",
            "jobs list over HTMX, page 2": f"/jobs/?cluster={cluster.pk}&page=2",
            "API job list": f"/api/jobs/?cluster={cluster.pk}&page_size=50"}
    out = {}
    for what, url in urls.items():
        headers = {"HX-Request": "true", "HX-Target": "job-list"} if "HTMX" in what else {}
        t, response = timed(lambda url=url, headers=headers: client.get(url, headers=headers), repeat)
        assert response.status_code == 200, (url, response.status_code)
        out[what] = (t, len(response.content))
    (base, fastest), _size = out["session page"]
    print(f"\n{total:,} jobs in cluster {cluster.name}; session page of #{session.pk} "
          f"({session.pods_total:,} pods)\n")
    print("| what | median / fastest | size | ratio to the session page (median / fastest) |")
    print("|---|---:|---:|---:|")
    for what, ((median, low), size) in out.items():
        print(f"| {what} | {median * 1000:.1f} / {low * 1000:.1f} ms | {size / 1024:.0f} KiB | "
              f"{median / base:.2f} / {low / fastest:.2f} |")


def reference_session(cluster, jobs: int):
    """A volcano dry run over the cluster's first `jobs` schedulable jobs, run in this process (no worker):
    the session whose page the jobs page is compared with."""
    from numaweb.jobs import services as job_services
    from numaweb.scheduling import services

    start = time.perf_counter()
    row = services.create_session(cluster, "volcano", True, job_services.schedulable_jobs(cluster)[:jobs])
    row = services.execute_session(row.pk)
    print(f"reference session #{row.pk}: {row.status}, {row.pods_total:,} pods in {time.perf_counter() - start:.0f} s")
    return row


# -- every page --------------------------------------------------------------------------------------------------
#: which real object a route's id names, by a word of the route's name (the first that matches)
ID_OF = (("cluster", "cluster"), ("comparison", "comparison"), ("room", "room"), ("rejected", "rejected"),
         ("node", "node"), ("allocation", "allocation"), ("job", "job"), ("session", "session"))
#: admin pages that add, edit or delete one object: forms of the admin, not the product's pages or lists
ADMIN_FORMS = ("_change", "_delete", "_history", "_add", "_password_change")


def every_route() -> list[tuple[str, list[str]]]:
    """(URL name, its keyword arguments) of every named route of the URLconf, includes walked; the API's
    format-suffix twins (`.json`) and the admin's per-object forms are left out."""
    from django.urls import URLResolver, get_resolver

    out = []

    def walk(patterns, namespaces):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, [*namespaces, pattern.namespace] if pattern.namespace else namespaces)
                continue
            if not pattern.name:
                continue
            regex = pattern.pattern.regex
            kwargs = list(regex.groupindex)
            name = ":".join([*namespaces, pattern.name])
            if "format" in kwargs or (name.startswith("admin:") and (
                    name.endswith(ADMIN_FORMS) or (kwargs and name != "admin:app_list"))):
                continue
            out.append((name, kwargs))

    walk(get_resolver().url_patterns, [])
    return sorted(dict.fromkeys((n, tuple(k)) for n, k in out))


def real_ids(cluster, session, comparison, room) -> dict[str, object]:
    """A real object of each kind for the routes' ids."""
    from numaweb.inventory.models import Allocation, RejectedPod
    from numaweb.scheduling.models import Placement

    placement = Placement.objects.filter(session=session, admitted=True).order_by("index").first()
    return {"cluster": cluster.pk, "comparison": comparison.pk, "room": room.pk if room else None,
            "rejected": RejectedPod.objects.values_list("pk", flat=True).first(),
            "node": placement.node_id, "allocation": Allocation.objects.values_list("pk", flat=True).first(),
            "job": session.jobs.order_by("id").values_list("pk", flat=True).first(), "session": session.pk,
            "index": placement.index, "app_label": "inventory"}


def route_urls(ids: dict[str, object]) -> tuple[list[tuple[str, str]], list[str]]:
    """(name, path) of every route with real ids; and the routes no real object could fill."""
    from django.urls import reverse

    urls, missing = [], []
    for name, kwargs in every_route():
        kind = next((kind for word, kind in ID_OF if word in name), None)
        index = 0 if kind == "comparison" else ids["index"]  # a comparison's first variant, a session's pod
        values = {k: index if k == "index" else ids["app_label"] if k == "app_label" else ids.get(kind)
                  for k in kwargs}
        if any(v is None for v in values.values()):
            missing.append(name)
            continue
        urls.append((name, reverse(name, kwargs=values)))
    return urls, missing


def wsgi_get(app, url: str, cookie: str, headers: dict[str, str] | None = None) -> tuple[int, int, int, bool]:
    """GET `url` from the WSGI application as a server would call it, for a client that accepts gzip (a browser,
    `curl --compressed`): (status, bytes of the body on the wire, bytes decoded, whether it is a download: an
    attachment, not a page or a list)."""
    import gzip
    import io

    path, _sep, query = url.partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query, "SERVER_NAME": "localhost",
               "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "localhost", "HTTP_COOKIE": cookie,
               "HTTP_ACCEPT": "text/html,application/json;q=0.9,*/*;q=0.8", "HTTP_ACCEPT_ENCODING": "gzip, deflate",
               "REMOTE_ADDR": "127.0.0.1", "wsgi.version": (1, 0), "wsgi.url_scheme": "http",
               "wsgi.input": io.BytesIO(), "wsgi.errors": sys.stderr, "wsgi.multithread": True,
               "wsgi.multiprocess": True, "wsgi.run_once": False}
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in (headers or {}).items()})
    status, download, encoding = [], [], []

    def start_response(line, response_headers, _exc=None):
        status.append(int(line.split()[0]))
        download.extend(v for k, v in response_headers if k.lower() == "content-disposition" and "attachment" in v)
        encoding.extend(v for k, v in response_headers if k.lower() == "content-encoding")

    body = app(environ, start_response)
    try:
        chunks = [bytes(chunk) for chunk in body]
    finally:
        getattr(body, "close", lambda: None)()
    wire = sum(len(chunk) for chunk in chunks)
    decoded = len(gzip.decompress(b"".join(chunks))) if "gzip" in encoding else wire
    return status[0], wire, decoded, bool(download)


def run_comparison(cluster, jobs):
    """The three profiles compared over `jobs` with a headroom shape, every variant run in this process."""
    from numaweb.comparisons import services as comparisons

    variants = comparisons.parse_variants(cluster, [{"profile": p} for p in ("volcano", "aligned", "unaware")])
    row = comparisons.create_comparison(cluster, variants, jobs, comparisons.parse_shape({"cpu": "4",
                                                                                          "memory": "8Gi"}))
    for pk in row.variants.order_by("index").values_list("pk", flat=True):
        comparisons.execute_variant(pk)
    row.refresh_from_db()
    return row


def clone_comparison(comparison) -> None:
    """A new comparison with a copy of `comparison`'s variants and jobs (same sizes, new ids)."""
    from django.db import transaction

    from numaweb.comparisons.models import Comparison

    with transaction.atomic():
        variants = list(comparison.variants.all())
        copy = Comparison.objects.get(pk=comparison.pk)
        copy.pk = None
        copy.save()
        copy.jobs.set(comparison.jobs.values_list("pk", flat=True))
        for variant in variants:
            variant.pk, variant.comparison = None, copy
        type(variants[0]).objects.bulk_create(variants)


def ask_make_room(cluster):
    """A make-room question of 4 pods of 16 CPUs, answered in this process (its page and API detail)."""
    from numaweb.room import services as room
    from numaweb.room.models import RoomPlan

    fields = room.parse_request(cluster, {"shape": {"cpu": "16", "memory": "8Gi"}, "count": 4})
    row = RoomPlan.objects.create(**fields)
    return room.execute(row.pk)


def build_every_page(args, cluster) -> None:
    """Sessions of the three profiles, a make-room answer and the stored comparisons (see the module's doc)."""
    from numaweb.comparisons.models import Comparison
    from numaweb.jobs import services as job_services
    from numaweb.scheduling import services

    jobs = job_services.schedulable_jobs(cluster)[:args.session_jobs]
    for profile in ("volcano", "aligned", "unaware"):
        start = time.perf_counter()
        row = services.execute_session(services.create_session(cluster, profile, True, jobs).pk)
        print(f"session #{row.pk} {profile}: {row.status}, {row.pods_total:,} pods in "
              f"{time.perf_counter() - start:.0f} s")
    start = time.perf_counter()
    first = run_comparison(cluster, jobs)
    print(f"comparison #{first.pk}: {first.status} in {time.perf_counter() - start:.0f} s")
    for _ in range(args.comparisons - Comparison.objects.count()):
        clone_comparison(first)
    start = time.perf_counter()
    room = ask_make_room(cluster)
    print(f"make room #{room.pk}: {room.status} in {time.perf_counter() - start:.0f} s")


#: query variants the routes alone do not ask: (label, path with {cluster}, {session}, {comparison}, {job} …,
#: extra headers)
VARIANTS = (
    ("dashboard, headroom question (4 CPU, 8Gi, aligned)", "/?hr-cpu=4&hr-memory=8Gi&hr-profile=aligned", {}),
    ("dashboard, page 50", "/?page=50", {}),
    ("dashboard, node list over HTMX, filtered", "/?cluster={cluster}&min_numa_free=8",
     {"HX-Request": "true", "HX-Target": "node-list"}),
    ("cluster map, free single-NUMA blocks of 8", "/clusters/{cluster}/map?measure=blocks&size=8", {}),
    ("cluster map, TopologyAffinityErrors of a session",
     "/clusters/{cluster}/map?measure=errors&session={session}", {}),
    ("pod search page, a job's pods", "/pods/?q={job_name}", {}),
    ("API pod search, a job's pods", "/api/pods/?q={job_name}", {}),
    ("jobs page, page 40", "/jobs/?cluster={cluster}&page=40", {}),
    ("jobs page, pending, name filter", "/jobs/?cluster={cluster}&status=pending&q={job_name}", {}),
    ("session page, rejected pods", "/sessions/{session}/?outcome=rejected", {}),
    ("comparison page body over HTMX", "/comparisons/{comparison}/",
     {"HX-Request": "true", "HX-Target": "comparison-body"}),
    ("API node list, one cluster", "/api/nodes/?cluster={cluster}", {}),
    ("API node list, 100 a page", "/api/nodes/?page_size=100", {}),
    ("API node list, 1,000 a page", "/api/nodes/?page_size=1000", {}),
    ("API job list, one cluster, pending", "/api/jobs/?cluster={cluster}&status=pending", {}),
    ("API session results, 100 a page", "/api/sessions/{session}/results/?page_size=100", {}),
    ("API allocations of a node", "/api/allocations/?node={node}", {}),
    ("API headroom (a question, answered in the request)", "/api/clusters/{cluster}/headroom/?cpu=4&memory=8Gi", {}),
)


def every_page(args, data_dir: Path) -> None:
    """Build once (or reuse --data), then ask every route and VARIANTS through the WSGI app; print the table."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from numaweb.comparisons.models import Comparison
    from numaweb.inventory.models import Cluster
    from numaweb.jobs.models import Job
    from numaweb.room.models import RoomPlan
    from numaweb.scheduling.models import SchedulingSession

    if not Cluster.objects.filter(name="scale").exists():
        start = time.perf_counter()
        call_command("demo", nodes=args.nodes, pods=args.pods, cluster="scale", stdout=StringIO())
        print(f"demo: {args.nodes} nodes, {args.pods} pods in {time.perf_counter() - start:.1f} s")
        build_every_page(args, Cluster.objects.get(name="scale"))
    cluster = Cluster.objects.get(name="scale")
    user = get_user_model().objects.filter(username="bench").first() or \
        get_user_model().objects.create_superuser("bench", password="bench-pw-1")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    from django.conf import settings

    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    session = SchedulingSession.objects.filter(cluster=cluster).order_by("id").first()
    comparison = Comparison.objects.order_by("id").first()
    ids = real_ids(cluster, session, comparison, RoomPlan.objects.order_by("id").first())
    job = Job.objects.filter(cluster=cluster).order_by("id")[Job.objects.filter(cluster=cluster).count() // 2]
    print(f"{Cluster.objects.count()} clusters, {cluster.nodes.count():,} nodes, {Job.objects.count():,} jobs, "
          f"{SchedulingSession.objects.count()} sessions, {Comparison.objects.count()} comparisons; "
          f"load average {Path('/proc/loadavg').read_text().split()[:3]}")
    urls, missing = route_urls(ids)
    fill = {"cluster": cluster.pk, "session": session.pk, "comparison": comparison.pk, "job_name": job.name,
            "node": ids["node"]}
    asked = [(name, url, {}) for name, url in urls]
    asked += [(label, url.format(**fill), headers) for label, url, headers in VARIANTS]
    from numaweb.wsgi import application

    rows = []
    for label, url, headers in asked:
        start = time.perf_counter()  # the first call fills the caches kept per generation (usage, headroom)
        status, size, decoded, download = wsgi_get(application, url, cookie, headers)
        times, cpu, first = [], [], (time.perf_counter() - start) * 1000
        for _ in range(0 if download else args.repeat):  # a download (an export) is timed once
            start, start_cpu = time.perf_counter(), time.process_time()
            status, size, decoded, download = wsgi_get(application, url, cookie, headers)
            times.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
        times, cpu = times or [first], cpu or [first]
        rows.append((label, url, status, size, decoded, first, statistics.median(times), min(times),
                     statistics.median(cpu), download))
        print(f"  {status} {size:>11,} B ({decoded:>11,} decoded) {first:8.1f} {statistics.median(times):8.1f} "
              f"{statistics.median(cpu):8.1f} ms  {url}", flush=True)
    print(f"\nload average after: {Path('/proc/loadavg').read_text().split()[:3]}\n")
    print("| route | path | status | bytes on the wire | bytes decoded | first ms | median ms | fastest ms "
          "| CPU ms (median) | ≤ 100 ms and ≤ 200 KB |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
    for label, url, status, size, decoded, first, median, fastest, cpu, download in rows:
        # judged on the server's CPU time: on a shared host a request's wall time is mostly its wait for a core;
        # and on the bytes sent, to a client that accepts gzip (the API's JSON is compressed, no HTML page is)
        ok = "yes" if cpu <= 100 and size <= 200 * 1024 else "**no**"
        if status == 405:
            ok = "not a GET"
        elif download:
            ok = "a download"
        print(f"| {label} | `{url}` | {status} | {size:,} | {decoded:,} | {first:.0f} | {median:.1f} | {fastest:.1f} "
              f"| {cpu:.1f} | {ok} |")
    if missing:
        print(f"\nno real object for: {', '.join(missing)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3, help="sessions run by the worker (volcano, aligned, ...)")
    parser.add_argument("--stored", type=int, default=50, help="stored sessions for the second measurement")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--jobs-only", action="store_true", help="measure the jobs page only (no worker)")
    parser.add_argument("--session-jobs", type=int, default=3600,
                        help="--jobs-only, --every-page: the sessions' jobs (the first N schedulable of the cluster)")
    parser.add_argument("--every-page", action="store_true", help="every page and API list (no worker)")
    parser.add_argument("--comparisons", type=int, default=20, help="--every-page: stored comparisons")
    parser.add_argument("--data", type=Path, help="--every-page: build into this folder once, reuse it later")
    args = parser.parse_args()
    data_dir = args.data or Path(tempfile.mkdtemp(prefix="numaweb-scale-"))
    if args.data:
        args.keep = True
        data_dir.mkdir(parents=True, exist_ok=True)
    worker = None
    try:
        setup(data_dir)
        if args.every_page:
            every_page(args, data_dir)
            return
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        from numaweb.inventory.models import Cluster
        from numaweb.worker.supervisor import worker_command

        start = time.perf_counter()
        call_command("demo", nodes=args.nodes, pods=args.pods, cluster="scale", stdout=StringIO())
        print(f"demo: {args.nodes} nodes, {args.pods} pods in {time.perf_counter() - start:.1f} s")
        cluster = Cluster.objects.get(name="scale")
        user = get_user_model().objects.create_superuser("bench", password="bench-pw-1")
        client = Client(HTTP_HOST="localhost")  # a host the settings allow (testserver is not one)
        client.force_login(user)
        if args.jobs_only:
            jobs_pages(client, cluster, reference_session(cluster, args.session_jobs), args.repeat)
            return
        start = time.perf_counter()
        cold = client.get("/")
        print(f"dashboard, first call (usage of every node computed): {time.perf_counter() - start:.2f} s, "
              f"{len(cold.content) / 1024:.0f} KiB of HTML")
        zero = {}
        for what, url in {"dashboard": "/", "sessions list": "/sessions/",
                          "API session list": "/api/sessions/?page_size=10"}.items():
            zero[what], _r = timed(lambda url=url: client.get(url), args.repeat)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(data_dir / "worker.log", "wb") as log:
            worker = subprocess.Popen(worker_command("WARNING"), cwd=ROOT, env=env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_worker(worker)
        runs = []
        before = result_bytes()
        for i in range(args.runs):
            profile = ("volcano", "aligned")[i % 2]
            session, wall = run_session(cluster, profile)
            after = result_bytes()
            runs.append((profile, session, wall, (after - before) / max(1, session.pods_total)))
            before = after
        first = runs[0][1]
        one = measure(client, first, args.repeat)
        one.update(zero)  # the dashboard and the lists: with no session stored
        poll = len(client.get(f"/api/sessions/{first.pk}/").content)
        stored = Cluster.objects.get(pk=cluster.pk).sessions.count()
        start = time.perf_counter()
        for _ in range(args.stored - stored):
            clone(first)
        print(f"stored sessions: {args.stored} ({args.runs} run, the rest copied in "
              f"{time.perf_counter() - start:.0f} s)")
        many = measure(client, first, args.repeat)
        jobs_pages(client, cluster, first, args.repeat)
        dashboard_html = len(client.get("/").content)

        print()
        print("| what | 0 stored sessions (1 for the session pages): median / fastest | 50 stored: median / "
              "fastest | ratio of medians | ratio of fastest |")
        print("|---|---:|---:|---:|---:|")
        for what in ("dashboard", "sessions list", "API session list", "session page", "pod hint table"):
            (m0, f0), (m1, f1) = one[what], many[what]
            print(f"| {what} | {m0 * 1000:.1f} / {f0 * 1000:.1f} ms | {m1 * 1000:.1f} / {f1 * 1000:.1f} ms | "
                  f"{m1 / m0:.2f} | {f1 / f0:.2f} |")
        print()
        print("| session | pods | submit → done | engine | engine share | commit | bytes per pod |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for profile, session, wall, per_pod in runs:
            engine, commit = session.engine_ms / 1000, session.commit_ms / 1000
            print(f"| #{session.pk} {profile} | {session.pods_total:,} | {wall:.1f} s | {engine:.1f} s | "
                  f"{100 * engine / wall:.0f} % | {commit:.1f} s | "
                  f"{per_pod:,.0f} B |")
        print()
        print(f"poll (GET /api/sessions/<id>/): {poll:,} bytes; dashboard HTML: {dashboard_html / 1024:.0f} KiB")
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        else:
            print(f"kept {data_dir}")


if __name__ == "__main__":
    main()
