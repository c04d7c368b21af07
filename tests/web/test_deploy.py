"""docker-compose.yml, the Dockerfile and .env.example agree with the settings. The compose file is read by
Docker Compose itself (`docker compose config`, no daemon needed) in a folder with no `.env`, as on a fresh
clone; the stack test (tests/stack) then runs the commands it resolved."""

import json
import re
from pathlib import Path

import yaml

from tests.deploy import compose_config, resolved_compose

ROOT = Path(__file__).resolve().parents[2]


def test_compose_config_passes_on_a_fresh_clone_without_env():
    done = compose_config()
    assert done.returncode == 0, done.stderr
    assert "version" not in yaml.safe_load((ROOT / "docker-compose.yml").read_text())  # current syntax
    # the documented variable, set in the shell (or in a .env beside the file), is what the services get
    with_env = compose_config(env={"DJANGO_ALLOWED_HOSTS": "numa.example"})
    assert json.loads(with_env.stdout)["services"]["web"]["environment"]["DJANGO_ALLOWED_HOSTS"] == "numa.example"
    # `cp .env.example .env` works as is: every setting reaches the services, inline comments dropped
    copied = compose_config(dotenv=ROOT / ".env.example")
    assert copied.returncode == 0, copied.stderr
    env = json.loads(copied.stdout)["services"]["worker"]["environment"]
    assert env["NUMAWEB_TASK_TIME_LIMIT"] == "3600" and env["DJANGO_ALLOWED_HOSTS"] == "localhost,127.0.0.1,[::1]"
    assert env["NUMAWEB_DATA_DIR"] == "/data"  # the shared volume


def test_compose_services_and_health_checks():
    compose = resolved_compose()
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
        assert "DJANGO_DEBUG" not in env  # settings default: off
    web = " ".join(services["web"]["command"])
    # the same server as `manage.py serve` (numaweb.scheduling.management.commands.serve.web_command)
    assert "gunicorn -c python:numaweb.gunicorn_conf numaweb.asgi" in web
    assert web.index("migrate") < web.index("collectstatic") < web.index("gunicorn")
    assert services["worker"]["command"][:4] == ["celery", "-A", "numaweb", "worker"]
    assert "--pool=prefork" in services["worker"]["command"]
    assert "pgdata" in compose["volumes"]


def test_compose_keeps_the_secret_key_and_names_its_hosts():
    """Web and worker share one data folder on a volume: the secret key made on first start survives a
    recreate and is the same in both. Allowed hosts come from DJANGO_ALLOWED_HOSTS, with no test host."""
    services = resolved_compose()["services"]
    for name in ("web", "worker"):
        data = services[name]["environment"]["NUMAWEB_DATA_DIR"]
        mounts = [v for v in services[name]["volumes"] if v["type"] == "volume" and v["target"] == data]
        assert len(mounts) == 1, services[name]["volumes"]
        assert mounts[0]["source"] == "appdata"
        hosts = services[name]["environment"]["DJANGO_ALLOWED_HOSTS"].split(",")
        assert "localhost" in hosts and "testserver" not in hosts
    assert "${DJANGO_ALLOWED_HOSTS" in (ROOT / "docker-compose.yml").read_text()
    assert "DJANGO_ALLOWED_HOSTS" in (ROOT / "README.md").read_text()


def test_settings_default_hosts_have_no_test_host():
    settings_text = (ROOT / "numaweb" / "settings.py").read_text()
    default = re.search(r'envlist\("DJANGO_ALLOWED_HOSTS", "([^"]*)"\)', settings_text).group(1)
    assert "testserver" not in default and "testserver" not in (ROOT / ".env.example").read_text()


def test_secret_key_is_one_key_for_processes_starting_together(tmp_path):
    """Two processes on one fresh data folder (compose's web and worker) end with the same key."""
    import subprocess
    import sys

    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    start = "from numaweb.startup import prepare; prepare(); import django; django.setup()"  # as manage.py starts
    env = {"NUMAWEB_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "numaweb.settings", "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", f"{start}; {code}"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and keys == {(tmp_path / "secret_key").read_text().strip()}
    assert not list(tmp_path.glob(".secret_key.*"))


def test_compose_redis_keeps_queued_sessions_across_restarts():
    compose = resolved_compose()
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    data = command[command.index("--dir") + 1]
    volume = next(v for v in redis["volumes"] if v["target"] == data)
    assert volume["source"] in compose["volumes"]


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


def test_dockerfile_installs_the_lock_and_runs_unprivileged():
    text = (ROOT / "Dockerfile").read_text()
    for part in ("scheduler_core", "numaweb", "manage.py", "templates", "static", "collectstatic", "gunicorn"):
        assert part in text
    assert "--require-hashes -r requirements/base.txt" in text and "--no-deps ." in text
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    # no secret key is baked into the image: the build's collectstatic uses a throwaway one
    build_step = next(line for line in text.splitlines() if "collectstatic" in line)
    assert "DJANGO_SECRET_KEY=" in build_step


def test_locks_pin_every_dependency_within_its_range():
    """requirements/base.txt (the image) and requirements/dev.txt (./dev, CI) are written from pyproject.toml by
    `./dev lock`: each pins every declared dependency at a version its range allows, with hashes."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    web = project["dependencies"] + project["optional-dependencies"]["web"]  # the engine's and the product's
    for lock, declared in (("base", web), ("dev", web + project["optional-dependencies"]["dev"])):
        text = (ROOT / "requirements" / f"{lock}.txt").read_text()
        pins = {m[0].lower().replace("_", "-"): m[1] for m in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}
        for line in declared:
            req = Requirement(line)
            name = req.name.lower().replace("_", "-")
            assert name in pins, f"{name} is not in requirements/{lock}.txt: run ./dev lock"
            assert req.specifier.contains(pins[name], prereleases=True), (lock, name, pins[name], str(req.specifier))
        assert "--hash=sha256:" in text


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
