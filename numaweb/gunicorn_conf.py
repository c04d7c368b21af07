"""gunicorn settings for both ways of serving numaweb: `manage.py serve` and docker-compose's web service run
`gunicorn -c python:numaweb.gunicorn_conf numaweb.asgi`.

Each process runs uvicorn's event loop (ASGI, numaweb/asgi.py): requests are parsed and their bodies read without
a thread, so slow clients (headers or a body trickled a byte at a time) cost a coroutine each and never hold what
other users need; a view then runs in a thread of its own. With gunicorn's threads facing the clients, 8 slow
connections stalled the site; with the event loop, 200 held for 60 s leave other requests at p99 < 1 s
(benchmarks/README.md, benchmarks/slow_clients.py). Sized to the machine: one process per CPU (at least two, so
one stuck process never stops the site); WEB_CONCURRENCY overrides.
Access log on stdout, server errors on stderr (application logs: numaweb.settings.LOGGING), both as JSON lines
when NUMAWEB_LOG_FORMAT=json, like the application's.
Request metrics: this server's own folder (numaweb.metrics_store), stale ones swept, before any worker starts."""

import os
from pathlib import Path

from numaweb import metrics_store

workers = int(os.environ.get("WEB_CONCURRENCY") or max(2, os.cpu_count() or 1))
worker_class = "uvicorn_worker.UvicornWorker"
timeout = 60
# uvicorn would otherwise take X-Forwarded-For from local clients as the client's address: the one rule for which
# address counts is numaweb.access.clients (NUMAWEB_TRUSTED_PROXIES)
forwarded_allow_ips = ""
graceful_timeout = 20
accesslog = "-"
errorlog = "-"
# gunicorn 25+ opens a control socket at one fixed path per user: two servers on a machine (a test run next to
# `./dev run`) would fight over it, and numaweb needs no runtime control (older versions ignore the name)
control_socket_disable = True

# read once per master (gunicorn reads this file again on SIGHUP: the folder it took is kept)
if Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")).name != metrics_store.folder_name(os.getpid()):
    _metrics = metrics_store.claim(metrics_store.base_folder(), os.getpid())
    if _metrics is None:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_metrics)

if os.environ.get("NUMAWEB_LOG_FORMAT", "plain").strip().lower() == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "numaweb.logs.JsonFormatter"}},
        "handlers": {
            "stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"},
            "stdout": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["stdout"], "propagate": False},
        },
    }
