"""docker-compose.yml, the Dockerfile and .env.example agree with the settings (Docker cannot run
here, so the compose file is checked as data, the way `docker-compose config -q` would)."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_services_and_health_checks():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "worker", "redis", "postgres"}
    for name, service in services.items():
        assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert env["DATABASE_URL"].startswith("postgresql://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
    web = services["web"]["command"]
    # the same server as `manage.py serve` (numaweb.scheduling.management.commands.serve.web_command)
    assert "gunicorn -c python:numaweb.gunicorn_conf numaweb.asgi" in web
    assert web.index("migrate") < web.index("collectstatic") < web.index("gunicorn")
    assert services["worker"]["command"].startswith("celery -A numaweb worker")
    assert "--pool=prefork" in services["worker"]["command"]
    assert "pgdata" in compose["volumes"]
    assert "DJANGO_DEBUG" not in services["web"]["environment"]  # settings default: off


def test_compose_redis_keeps_queued_sessions_across_restarts():
    redis = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    data = command[command.index("--dir") + 1]
    volume = next(v for v in redis["volumes"] if v.endswith(f":{data}"))
    assert volume.split(":")[0] in yaml.safe_load((ROOT / "docker-compose.yml").read_text())["volumes"]


def test_serve_runs_the_compose_web_server():
    from numaweb.scheduling.management.commands.serve import web_command

    command = web_command("127.0.0.1:9")
    assert command[1:3] == ["-m", "gunicorn"] and command[command.index("-c") + 1] == "python:numaweb.gunicorn_conf"
    assert command[-1] == "numaweb.asgi"


def test_env_example_lists_every_variable_the_settings_read():
    settings_text = (ROOT / "numaweb" / "settings.py").read_text()
    read = set(re.findall(r'(?:environ\.get|envbool|envint|envlist)\(\s*"([A-Z_]+)"', settings_text))
    example = (ROOT / ".env.example").read_text()
    missing = sorted(v for v in read if v not in example)
    assert read and not missing, missing


def test_dockerfile_copies_what_the_product_needs():
    text = (ROOT / "Dockerfile").read_text()
    for part in ("scheduler_core", "numaweb", "manage.py", "templates", "static", "collectstatic", "gunicorn"):
        assert part in text


def test_the_asgi_entry_refuses_a_body_over_the_limit_before_reading_it(settings):
    """The product's server reads bodies before Django runs: numaweb.asgi answers 413 on the declared length alone."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from numaweb.asgi import application

    settings.NUMAWEB_MAX_UPLOAD_BYTES = 1000
    sent: list[dict] = []

    async def receive():
        raise AssertionError("the body was read")

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/nodes/upload/", "headers": [(b"content-length", b"5000")]}
    with ThreadPoolExecutor(1) as pool:  # an event loop of its own (the browser tests may leave one running here)
        pool.submit(lambda: asyncio.run(application(scope, receive, send))).result()
    assert sent[0]["status"] == 413
    assert b"larger than the limit of 1000 bytes" in sent[1]["body"] and b"NUMAWEB_MAX_UPLOAD_BYTES" in sent[1]["body"]
