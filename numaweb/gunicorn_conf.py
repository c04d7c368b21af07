"""gunicorn settings for both ways of serving numaweb: `manage.py serve` and docker-compose's web service run
`gunicorn -c python:numaweb.gunicorn_conf numaweb.wsgi`.

Sized to the machine: one process per CPU (at least two, so one stuck request never stops the site), each with
threads, because a request mostly waits on the database. WEB_CONCURRENCY and GUNICORN_THREADS override.
Access log on stdout, server errors on stderr (application logs: numaweb.settings.LOGGING), both as JSON lines
when NUMAWEB_LOG_FORMAT=json, like the application's."""

import os

workers = int(os.environ.get("WEB_CONCURRENCY") or max(2, os.cpu_count() or 1))
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS") or 4)
timeout = 60
graceful_timeout = 20
accesslog = "-"
errorlog = "-"
# gunicorn 25+ opens a control socket at one fixed path per user: two servers on a machine (a test run next to
# `./dev run`) would fight over it, and numaweb needs no runtime control (older versions ignore the name)
control_socket_disable = True

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
