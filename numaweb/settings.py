"""numaweb settings: one file, driven by environment variables, runnable with none set.

Modes
- Embedded (default): SQLite in WAL mode with a busy timeout and IMMEDIATE transactions, Celery on
  kombu's file-system transport in `$NUMAWEB_DATA_DIR/broker`; `manage.py serve` starts a worker.
- `REDIS_URL` set: Celery's broker is Redis.  `DATABASE_URL` set: that database (PostgreSQL via
  psycopg 3) replaces SQLite.  docker-compose sets both.

Every variable is listed, with its default, in `.env.example`. Importing this module only reads: the data
folder, its queue and static folders and the secret key kept there are made by `numaweb.startup.prepare()`, which
the entry points call first (manage.py, numaweb.asgi and numaweb.wsgi, the Celery worker). An invalid value is an
`ImproperlyConfigured` naming its variable.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    """Strict boolean: only the usual spellings, anything else is a start-up error (no silent False)."""
    value = os.environ.get(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true/false)")


def envint(name: str, default: str) -> int:
    value = os.environ.get(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DATA_DIR = Path(os.environ.get("NUMAWEB_DATA_DIR", BASE_DIR / "var")).resolve()

DEBUG = envbool("DJANGO_DEBUG", "false")

# DJANGO_SECRET_KEY, else the random key kept in the data folder (so embedded mode needs no setup), which
# numaweb.startup.prepare() writes the first time; empty until then (Django refuses to sign with an empty key)
SECRET_KEY_FILE = DATA_DIR / "secret_key"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or (SECRET_KEY_FILE.read_text().strip()
                                                     if SECRET_KEY_FILE.exists() else "")
# the names the site is reached by (a request for another answers 400); Django's test client adds its own
ALLOWED_HOSTS = envlist("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = envlist("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "numaweb.inventory",
    "numaweb.jobs",
    "numaweb.scheduling",
    "numaweb.comparisons",
    "numaweb.room",
    "numaweb.worker",
    "numaweb.api",
    "numaweb.pages",
    "numaweb.access",
    "axes",
    "simple_history",
]

MIDDLEWARE = [
    # request latency by view for /metrics (numaweb.metrics), around everything else
    "numaweb.metrics.RequestTimer",
    # the API's JSON answers to a GET gzip-compressed when the client accepts it; never an HTML page (BREACH)
    "numaweb.compression.CompressApiJson",
    "numaweb.limits.RequestSizeLimit",
    # a full disk or database answers 503 with Retry-After, not 500 (numaweb.faults)
    "numaweb.faults.StorageFaults",
    "django.middleware.security.SecurityMiddleware",
    # the Content-Security-Policy on every response, static files included (numaweb.access; CONTENT_SECURITY_POLICY)
    "csp.middleware.CSPMiddleware",
    # static files straight from STATIC_ROOT (hashed names, gzip, far-future cache headers), before any other work
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # every page needs a login unless its view says otherwise (numaweb.access.decorators.requires, healthz)
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # who made a change, for the audit trail (numaweb.access.history)
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # failed logins lock out (django-axes); last, so it answers for any view that authenticates
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "numaweb.urls"
WSGI_APPLICATION = "numaweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "numaweb.pages.context_processors.workers",
                "numaweb.access.context.role",
            ],
        },
    },
]

# -- database ----------------------------------------------------------------------------------
# A pytest run always uses its own SQLite file, whatever DATABASE_URL says: a developer's or CI's server must
# never receive the test run. (The PostgreSQL test starts a throwaway server and runs manage.py against it in
# subprocesses, which do honour DATABASE_URL.)
UNDER_PYTEST = "pytest" in sys.modules
# SQLite: how long a writer waits for another's commit before it fails
NUMAWEB_SQLITE_BUSY_SECONDS = envint("NUMAWEB_SQLITE_BUSY_SECONDS", "300")
DATABASE_URL = "" if UNDER_PYTEST else os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=envint("DATABASE_CONN_MAX_AGE", "0"))}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("DATABASE_PATH", str(DATA_DIR / "numaweb.sqlite3")),
            # web and worker write at the same time: WAL lets readers run during a write, the busy
            # timeout waits for the lock instead of failing, IMMEDIATE takes it at BEGIN (no upgrade deadlock).
            # The timeout outlasts the longest commit (a 50,000-pod session holds the lock about 12 s, the
            # 100,000 pods a session may schedule twice that): writers wait, they never answer "database is locked"
            "OPTIONS": {
                "init_command": f"PRAGMA journal_mode=WAL; PRAGMA busy_timeout={NUMAWEB_SQLITE_BUSY_SECONDS * 1000}; "
                                "PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
            },
            # tests use a file too (not shared-cache memory, whose table locks ignore the busy timeout),
            # so a worker thread or process and the test see one database the way the product does
            "TEST": {"NAME": os.environ.get("DATABASE_TEST_PATH", str(DATA_DIR / f"test-{os.getpid()}.sqlite3"))},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", DATA_DIR / "static"))
# WhiteNoise serves what collectstatic wrote (`manage.py serve` and the compose web service run it first): names
# carry a content hash, so they are cached for a year; gzip copies are served to clients that accept them.
# A pytest run renders templates without a collectstatic (the live server serves the source files), so it keeps
# the plain storage; the stack test (tests/stack) runs the product's storage end to end.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage" if UNDER_PYTEST
                    else "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# -- access (numaweb.access): roles viewer/operator/admin, login everywhere --------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# true: anonymous visitors may read pages and the API (a demo site); writes still need a role
NUMAWEB_PUBLIC_READ = envbool("NUMAWEB_PUBLIC_READ", "false")
# failed logins (login page, admin, /api/auth-token/): after AXES_FAILURE_LIMIT failures for one name from one
# address that pair, and after NUMAWEB_LOGIN_ADDRESS_FAILURE_LIMIT failures from one address (any names) that address,
# are locked out for NUMAWEB_LOGIN_LOCKOUT_MINUTES (numaweb.access.lockout); API tokens are never affected;
# `manage.py axes_reset` unlocks
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = envint("NUMAWEB_LOGIN_FAILURE_LIMIT", "5")
AXES_COOLOFF_TIME = timedelta(minutes=envint("NUMAWEB_LOGIN_LOCKOUT_MINUTES", "15"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "numaweb.access.lockout.LockoutHandler"
NUMAWEB_LOGIN_ADDRESS_FAILURE_LIMIT = envint("NUMAWEB_LOGIN_ADDRESS_FAILURE_LIMIT", "30")
# API tokens are refused this many days after they were made (0: never) and deleted when their user's password
# changes (numaweb.access.tokens)
NUMAWEB_TOKEN_LIFETIME_DAYS = envint("NUMAWEB_TOKEN_LIFETIME_DAYS", "90")
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
# the client address throttles and lock-outs count: the socket's, unless this many proxies of ours stand in front
# and append to X-Forwarded-For (numaweb.access.clients)
NUMAWEB_TRUSTED_PROXIES = envint("NUMAWEB_TRUSTED_PROXIES", "0")
AXES_CLIENT_IP_CALLABLE = "numaweb.access.clients.client_ip"
# HTTPS deployments: HSTS, and cookies only over HTTPS
NUMAWEB_HTTPS = envbool("NUMAWEB_HTTPS", "false")
SECURE_HSTS_SECONDS = envint("NUMAWEB_HSTS_SECONDS", "31536000") if NUMAWEB_HTTPS else 0
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = NUMAWEB_HTTPS
# no inline script or style anywhere: scripts, styles and images come from this site only (htmx included,
# its indicator style is in numaweb.css); nothing may frame the pages
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        **({"upgrade-insecure-requests": True} if NUMAWEB_HTTPS else {}),
    },
}

# -- Celery ----------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
BROKER_DIR = DATA_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
else:
    CELERY_BROKER_URL = "numaweb-fs://"  # kombu's file-system queue, written atomically
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR),
        "data_folder_out": str(BROKER_DIR),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        "polling_interval": 0.1,
    }
    # the file-system transport has no broadcast channel: no remote control, gossip or mingle
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# progress and results live on the session row, never in a Celery result store
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# every task (a session, a comparison variant) has two time limits: past the soft one the run stops between pods
# and fails with a message naming it (nothing written); past the hard one Celery's prefork pool ends the process
# and the session fails naming that limit
NUMAWEB_TASK_TIME_LIMIT = envint("NUMAWEB_TASK_TIME_LIMIT", "3600")
NUMAWEB_TASK_SOFT_TIME_LIMIT = envint("NUMAWEB_TASK_SOFT_TIME_LIMIT", str(max(1, NUMAWEB_TASK_TIME_LIMIT - 60)))
if not 0 < NUMAWEB_TASK_SOFT_TIME_LIMIT < NUMAWEB_TASK_TIME_LIMIT:
    raise ImproperlyConfigured(f"NUMAWEB_TASK_SOFT_TIME_LIMIT={NUMAWEB_TASK_SOFT_TIME_LIMIT} must be above 0 and below "
                     f"NUMAWEB_TASK_TIME_LIMIT={NUMAWEB_TASK_TIME_LIMIT}")
CELERY_TASK_TIME_LIMIT = NUMAWEB_TASK_TIME_LIMIT
CELERY_TASK_SOFT_TIME_LIMIT = NUMAWEB_TASK_SOFT_TIME_LIMIT
# a pool child that dies mid-session: the session task's message is put back (acks_late,
# reject_on_worker_lost) after this wait for a result (default 10 s); results live on the session row
CELERY_WORKER_LOST_WAIT = 1.0
CELERY_TASK_ALWAYS_EAGER = envbool("NUMAWEB_EAGER", "false")

# -- cache: what every web process must agree on (the API's throttle counts) --------------------------------
# Redis when configured, else a table in the database (created by the access app's migrations); never the
# default per-process memory, which let two gunicorn processes each accept the whole rate. A pytest run keeps
# each test's counts in its own process memory (tests/access/test_shared_counts.py runs two real servers)
CACHES: dict[str, dict[str, object]]
if UNDER_PYTEST:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
elif REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                          "KEY_PREFIX": "numaweb"}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "numaweb_cache",
                          "OPTIONS": {"MAX_ENTRIES": 100_000}}}

# -- REST API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "numaweb.access.tokens.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["numaweb.access.drf.RolePermission"],
    "DEFAULT_THROTTLE_CLASSES": ["numaweb.access.throttles.WriteRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "writes": os.environ.get("NUMAWEB_API_WRITE_RATE", "300/minute"),
        "auth-token": os.environ.get("NUMAWEB_TOKEN_RATE", "10/minute"),
    },
    # DRF's browsable pages need inline styles and scripts the Content-Security-Policy refuses: only under DEBUG
    # (where a developer may want them); otherwise a browser gets the JSON itself
    # DRF's JSON renderer, which also writes stored JSON documents read as text as they are (numaweb.api.rawjson)
    "DEFAULT_RENDERER_CLASSES": ["numaweb.api.rawjson.JSONRenderer",
                                 *(["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else [])],
    "DEFAULT_PAGINATION_CLASS": "numaweb.api.pagination.Pagination",
    "PAGE_SIZE": envint("NUMAWEB_API_PAGE_SIZE", "100"),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PARSER_CLASSES": [
        "numaweb.limits.DepthLimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "numaweb.limits.StrictMultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "numaweb API",
    "DESCRIPTION": "Cluster inventory (nodes with NUMA topology and kubelet settings), jobs, and scheduling "
                   "sessions with per-pod placements and per-node-class verdicts.",
    "VERSION": "1",
    "SCHEMA_PATH_PREFIX": "/api/",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["numaweb.access.drf.RolePermission"],
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # every answer of every operation, 401/403/404/413/429 included, with its body (numaweb.api.schema)
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "numaweb.api.schema.document_statuses"],
    "ENUM_NAME_OVERRIDES": {
        "TopologyPolicyEnum": "numaweb.inventory.models.TOPOLOGY_POLICY_CHOICES",
        "CpuManagerPolicyEnum": "numaweb.inventory.models.CPU_MANAGER_CHOICES",
        "MemoryManagerPolicyEnum": "numaweb.inventory.models.MEMORY_MANAGER_CHOICES",
        "RunStatusEnum": "numaweb.worker.models.RunStatus",  # sessions, comparisons, make-room questions
        "PodStatusEnum": "numaweb.scheduling.models.PodStatus",
    },
}

# -- limits on input (README "Limits"); each answers 400 (413 for a body too large) naming the limit
# a request body (upload, manifest, form) larger than this is refused with 413 before any byte is read
# (numaweb.limits.RequestSizeLimit); the engine reads topology files of at most 16 MiB in any case
NUMAWEB_MAX_UPLOAD_BYTES = envint("NUMAWEB_MAX_UPLOAD_BYTES", str(16 * 1024 * 1024))
DATA_UPLOAD_MAX_MEMORY_SIZE = NUMAWEB_MAX_UPLOAD_BYTES
# a request body (and an uploaded file) past this many bytes is spooled to a temporary file, not held in memory;
# the whole body must arrive within NUMAWEB_BODY_SECONDS, else 408 (numaweb.asgi)
FILE_UPLOAD_MAX_MEMORY_SIZE = envint("NUMAWEB_BODY_MEMORY_BYTES", str(256 * 1024))
NUMAWEB_BODY_SECONDS = envint("NUMAWEB_BODY_SECONDS", "60")
# a JSON body nested deeper than this is a 400 naming the limit (numaweb.limits)
NUMAWEB_MAX_JSON_DEPTH = envint("NUMAWEB_MAX_JSON_DEPTH", "64")
# jobs: replicas of one task, pods of one job, pods one session schedules
NUMAWEB_MAX_REPLICAS_PER_TASK = envint("NUMAWEB_MAX_REPLICAS_PER_TASK", "10000")
NUMAWEB_MAX_PODS_PER_JOB = envint("NUMAWEB_MAX_PODS_PER_JOB", "10000")
NUMAWEB_MAX_PODS_PER_SESSION = envint("NUMAWEB_MAX_PODS_PER_SESSION", "100000")
# a list in a request (make room's pinned and protected_namespaces, the jobs a session or comparison names, a
# job's tasks): more items is a 400 naming the field, before any item is looked at
NUMAWEB_MAX_LIST_ITEMS = envint("NUMAWEB_MAX_LIST_ITEMS", "1000")
# check-state: containers in one kubelet state file or pods file (each costs a replay of ~0.5 ms, several
# replays when the policy options are searched)
NUMAWEB_MAX_STATE_CONTAINERS = envint("NUMAWEB_MAX_STATE_CONTAINERS", "5000")
# headroom (the API, the dashboard's box, a comparison's shape) places at most this many pods in its dry-run
# sessions and starts none after this many seconds; past either the answer says "at least N"
NUMAWEB_HEADROOM_MAX_PODS = envint("NUMAWEB_HEADROOM_MAX_PODS", "10000")
NUMAWEB_HEADROOM_SECONDS = envint("NUMAWEB_HEADROOM_SECONDS", "10")
# headroom questions answered at once by one web process; one more answers 429 (numaweb.comparisons.gate)
NUMAWEB_HEADROOM_CONCURRENCY = envint("NUMAWEB_HEADROOM_CONCURRENCY", "1")
# a session that loses the optimistic-concurrency race retries this many times against fresh state
# Make room (docs/MAKE_ROOM.md): the search's own time, the worker task's hard limit, the sizes answered,
# and what may never move whatever a request says (protected namespaces: the default; pinned: always)
NUMAWEB_MAKE_ROOM_SECONDS = envint("NUMAWEB_MAKE_ROOM_SECONDS", "6")
NUMAWEB_MAKE_ROOM_TASK_SECONDS = envint("NUMAWEB_MAKE_ROOM_TASK_SECONDS", "120")
NUMAWEB_MAKE_ROOM_MAX_NODES = envint("NUMAWEB_MAKE_ROOM_MAX_NODES", "20000")
NUMAWEB_MAKE_ROOM_MAX_PODS = envint("NUMAWEB_MAKE_ROOM_MAX_PODS", "64")
NUMAWEB_MAKE_ROOM_MAX_MOVES = envint("NUMAWEB_MAKE_ROOM_MAX_MOVES", "16")
NUMAWEB_MAKE_ROOM_MAX_CHECKS = envint("NUMAWEB_MAKE_ROOM_MAX_CHECKS", "200")  # candidate plans carried out on copies
NUMAWEB_MAKE_ROOM_PROTECTED_NAMESPACES = envlist("NUMAWEB_MAKE_ROOM_PROTECTED_NAMESPACES", "kube-system")
NUMAWEB_MAKE_ROOM_PINNED = envlist("NUMAWEB_MAKE_ROOM_PINNED", "")
# questions waiting or being answered at once, per user and per cluster: one more is refused (429) until one ends
NUMAWEB_MAKE_ROOM_QUEUED_PER_USER = envint("NUMAWEB_MAKE_ROOM_QUEUED_PER_USER", "4")
NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER = envint("NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER", "12")
# The queue ranked (docs/MAKE_ROOM.md, "The queue"): the advisor's whole time and each job's share, the worker
# task's soft limit (hard: +30 s), the pending jobs asked about (by priority, then age) and plans checked per job
NUMAWEB_DEFRAG_SECONDS = envint("NUMAWEB_DEFRAG_SECONDS", "120")
NUMAWEB_DEFRAG_JOB_SECONDS = envint("NUMAWEB_DEFRAG_JOB_SECONDS", "6")
NUMAWEB_DEFRAG_TASK_SECONDS = envint("NUMAWEB_DEFRAG_TASK_SECONDS", "300")
NUMAWEB_DEFRAG_MAX_JOBS = envint("NUMAWEB_DEFRAG_MAX_JOBS", "200")
NUMAWEB_DEFRAG_MAX_CHECKS = envint("NUMAWEB_DEFRAG_MAX_CHECKS", "50")

NUMAWEB_COMMIT_RETRIES = envint("NUMAWEB_COMMIT_RETRIES", "5")
# a running session whose worker sent no heartbeat (progress write) for this long counts as lost: it is shown
# failed ("worker lost") and can be re-run; a worker process found dead on this host counts as lost at once
NUMAWEB_SESSION_STALE_SECONDS = envint("NUMAWEB_SESSION_STALE_SECONDS", "120")
# a run (session, comparison variant, make-room question) whose worker died is run again automatically until it
# has been started this many times; after that it is failed naming this setting, so a run that kills its worker
# cannot loop forever. NUMAWEB_SESSION_MAX_RUNS, its name when only sessions had a cap, is still read.
_MAX_RUNS_NAME = "NUMAWEB_SESSION_MAX_RUNS" if "NUMAWEB_RUN_MAX_RUNS" not in os.environ and \
    "NUMAWEB_SESSION_MAX_RUNS" in os.environ else "NUMAWEB_RUN_MAX_RUNS"
NUMAWEB_RUN_MAX_RUNS = envint(_MAX_RUNS_NAME, "3")
if NUMAWEB_RUN_MAX_RUNS < 1:
    raise ImproperlyConfigured(f"{_MAX_RUNS_NAME}={NUMAWEB_RUN_MAX_RUNS} must be at least 1")

# workers: each publishes a heartbeat (a WorkerHeartbeat row) every third of this; /healthz reports "degraded" (still
# 200: the web stays ready) and the pages show a banner when no worker has been seen for this long
NUMAWEB_WORKER_TIMEOUT = envint("NUMAWEB_WORKER_TIMEOUT", "30")
# node agents (numaweb-agent): a node whose agent has sent no report for this long is shown stale (its observed
# allocations and state check may be out of date) on the node page, the cluster map, pod search and the API
NUMAWEB_AGENT_STALE_SECONDS = envint("NUMAWEB_AGENT_STALE_SECONDS", "300")
# a node's report sooner than this many seconds after its last one is refused (429 with Retry-After): an agent
# in a loop, or two agents claiming one node (the agents' own interval is 60 s)
NUMAWEB_AGENT_MIN_INTERVAL = envint("NUMAWEB_AGENT_MIN_INTERVAL", "5")
# /metrics (Prometheus): a scrape sends "Authorization: Bearer <this>", or comes from an address or network of the
# allow-list (comma-separated, e.g. 10.0.0.0/8,127.0.0.1); with neither, nobody may scrape (numaweb.metrics)
NUMAWEB_METRICS_TOKEN = os.environ.get("NUMAWEB_METRICS_TOKEN", "")
NUMAWEB_METRICS_ALLOWED_IPS = envlist("NUMAWEB_METRICS_ALLOWED_IPS", "")
for _entry in NUMAWEB_METRICS_ALLOWED_IPS:
    try:
        ipaddress.ip_network(_entry, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"NUMAWEB_METRICS_ALLOWED_IPS: {_entry!r} is not an address or network") from None
# the fleet figures of /metrics (numaweb/scheduling/fleet.py): stranded capacity is measured for the commonest
# shapes of each cluster's pending pods (at most this many) plus these ("cpu[,memory][,resource=count...]"
# separated by ";"), per node pool (at most this many per cluster; the smallest fold into "other")
NUMAWEB_FLEET_MAX_SHAPES = envint("NUMAWEB_FLEET_MAX_SHAPES", "8")
NUMAWEB_FLEET_SHAPES = os.environ.get("NUMAWEB_FLEET_SHAPES", "")
NUMAWEB_FLEET_MAX_POOLS = envint("NUMAWEB_FLEET_MAX_POOLS", "20")
# a session still pending this long after it was (last) queued is queued again by a worker's periodic check, so a
# lost broker message or a Redis restart delays a session but never loses it (duplicates are harmless: a run
# claims the row first)
NUMAWEB_REQUEUE_SECONDS = envint("NUMAWEB_REQUEUE_SECONDS", "60")
# a worker one of whose received tasks waited this long while a pool process was free, nothing starting or ending
# meanwhile, has a wedged pool: it ends itself to be replaced, and its runs are queued again (numaweb.worker.stall)
NUMAWEB_WORKER_STALL_SECONDS = envint("NUMAWEB_WORKER_STALL_SECONDS", "20")
# while a session or a make-room question waits for a worker, comparison variants run on at most this many worker
# processes at once; the others step back (sent again a moment later), so one comparison cannot hold every worker
NUMAWEB_VARIANT_SHARE = envint("NUMAWEB_VARIANT_SHARE", "1")

# -- logs: everything on stderr, plain lines or one JSON object a line ----------------------------------------
NUMAWEB_LOG_FORMAT = os.environ.get("NUMAWEB_LOG_FORMAT", "plain").strip().lower()
if NUMAWEB_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"NUMAWEB_LOG_FORMAT={NUMAWEB_LOG_FORMAT!r} is not a log format (use plain or json)")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"},
        "json": {"()": "numaweb.logs.JsonFormatter"},
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                            "formatter": NUMAWEB_LOG_FORMAT}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
    "loggers": {
        "numaweb": {"handlers": ["stderr"], "level": os.environ.get("NUMAWEB_LOG_LEVEL", "INFO"), "propagate": False},
        # every 5xx with its traceback (Django's default only mails admins when DEBUG is off)
        "django.request": {"handlers": ["stderr"], "level": "ERROR", "propagate": False},
        "celery": {"level": "INFO"},
    },
}
