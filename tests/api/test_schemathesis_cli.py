"""The API against its own schema over HTTP, as anyone can check it: Schemathesis' command line, every check and
the examples, coverage and fuzzing phases, 25 cases per operation, with its default settings (no configuration
file: a schema-valid request must be answered 2xx, 401, 403, 404, 409 or 429, a schema-violating one refused, every
status documented), against the product's web server (gunicorn with uvicorn's worker, as `manage.py serve` starts
it) over the demo data, as a viewer. No finding is allowed.

As an operator or an admin the same run still reports the writes whose 400 the schema cannot foresee: a body
naming an id that does not exist, a duplicate cluster name, an upload that is no text nor archive, make room's
"job or shape", a node's topology document (5 operations as operator, 14 as admin). The in-process
tests/api/test_fuzz.py accepts that 400 for all three roles; here they wait for a decision (404 and 409 for
those, or a schema that can say more), so only the viewer is held to zero.

    schemathesis run <base>/api/schema/ --checks all --phases examples,coverage,fuzzing -n 25 \\
        -H "Authorization: Token <key>" --generation-deterministic

Deterministic generation: every run sends the same requests, so a red run is reproducible. About 4 minutes
per role on two cores at load 10 (the in-process tests/api/test_fuzz.py covers the stateful phase)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.servers import product_web_server

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("viewer", "admin")  # the admin sends the chunked bodies
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A scratch data folder with the demo cluster and jobs, a viewer and an admin with tokens, the web server."""
    folder = tmp_path_factory.mktemp("schemathesis")
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(NUMAWEB_DATA_DIR=str(folder / "data"), WEB_CONCURRENCY="1", PYTHONUNBUFFERED="1")
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "collectstatic", "--noinput", "-v0")
    manage(env, "demo")
    tokens = {role: manage(env, "create_user", f"st-{role}", "--role", role).split()[-1] for role in ROLES}
    with product_web_server(env, folder / "web.log") as base:
        yield {"base": base, "tokens": tokens, "folder": folder, "env": env}


@pytest.mark.parametrize("role", ["viewer"])
def test_schemathesis_finds_nothing(site, role):
    command = [str(SCHEMATHESIS), "run", f"{site['base']}/api/schema/", "--checks", "all",
               "--phases", "examples,coverage,fuzzing", "-n", "25", "--generation-deterministic",
               "-H", f"Authorization: Token {site['tokens'][role]}", "--no-color"]
    # its own folder (Schemathesis may write there), where no configuration file changes its defaults
    cwd = site["folder"] / role
    cwd.mkdir()
    done = subprocess.run(command, cwd=cwd, env=site["env"], capture_output=True, text=True, timeout=1200)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-30000:]
    # the summary's "Failures:" lists the findings (warnings, such as a viewer's writes all refused, are not)
    assert "Failures:" not in report and "Errors:" not in report, report[-30000:]


def post_chunked(base: str, token: str, path: str, pieces: list[bytes]) -> tuple[int, dict]:
    """POST with Transfer-Encoding: chunked (no Content-Length), one chunk per piece."""
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        connection.request("POST", path, body=iter(pieces), encode_chunked=True, headers={
            "Authorization": f"Token {token}", "Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_chunked_body_is_read_whole_up_to_the_limit(site):
    """A body without a length (as Schemathesis sends some forms) is a valid request: read whole and answered;
    past NUMAWEB_MAX_UPLOAD_BYTES (16 MiB here) it is refused with 413, as a declared one is."""
    admin = site["tokens"]["admin"]
    pieces = [b'{"name": "chun', b'ked", "description": "x"}']
    status, body = post_chunked(site["base"], admin, "/api/clusters/", pieces)
    assert status == 201 and body["name"] == "chunked" and body["description"] == "x", body
    status, body = post_chunked(site["base"], admin, "/api/clusters/", [b" " * 2**20] * 17)
    assert status == 413 and "NUMAWEB_MAX_UPLOAD_BYTES" in body["detail"], body
