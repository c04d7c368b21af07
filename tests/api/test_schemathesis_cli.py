"""The API against its own schema over HTTP, as anyone can check it: Schemathesis' command line, every check and
the examples, coverage and fuzzing phases, 25 cases per operation, against the product's web server (gunicorn with
uvicorn's worker, as `manage.py serve` starts it) over the demo data, as a viewer, an operator and an admin. No
finding is allowed.

    schemathesis run <base>/api/schema/ --checks all --phases examples,coverage,fuzzing -n 25 \\
        -H "Authorization: Token <key>" --generation-deterministic

Run from the project's folder, so Schemathesis reads the project's schemathesis.toml: its defaults everywhere (a
schema-valid request answered 2xx, 401, 403, 404, 409 or 429, a schema-violating one refused, every status
documented), except that the writes it names may answer 400 naming the field for a rule a schema cannot state (a
referenced id that must exist, a unique name, an upload's format, make room's dependent fields); the file says
which and why. Deterministic generation: every run sends the same requests, so a red run is reproducible. The
three roles run side by side, about 5 minutes on two cores (the in-process tests/api/test_fuzz.py covers the
stateful phase)."""

from __future__ import annotations

import contextlib
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
ROLES = ("viewer", "operator", "admin")
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
    # the chunked bodies' own admin: Schemathesis' admin may have used up its writes per minute (429) by then
    tokens["chunked"] = manage(env, "create_user", "st-chunked", "--role", "admin").split()[-1]
    with product_web_server(env, folder / "web.log") as base:
        yield {"base": base, "tokens": tokens, "folder": folder, "env": env}


def test_schemathesis_finds_nothing(site):
    runs = {}
    with contextlib.ExitStack() as files:
        for role in ROLES:
            command = [str(SCHEMATHESIS), "run", f"{site['base']}/api/schema/", "--checks", "all",
                       "--phases", "examples,coverage,fuzzing", "-n", "25", "--generation-deterministic",
                       "-H", f"Authorization: Token {site['tokens'][role]}", "--no-color"]
            out = files.enter_context(open(site["folder"] / f"{role}.out", "w+"))
            # from the project's folder: Schemathesis reads schemathesis.toml there
            runs[role] = (subprocess.Popen(command, cwd=ROOT, env=site["env"], stdout=out, stderr=subprocess.STDOUT),
                          out)
        for role, (proc, out) in runs.items():
            code = proc.wait(timeout=1800)
            out.seek(0)
            report = out.read()
            assert code == 0, f"{role}: " + report[-30000:]
            # the summary's "Failures:" lists the findings (warnings, such as a viewer's writes all refused, are not)
            assert "Failures:" not in report and "Errors:" not in report, f"{role}: " + report[-30000:]


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
    admin = site["tokens"]["chunked"]
    pieces = [b'{"name": "chun', b'ked", "description": "x"}']
    status, body = post_chunked(site["base"], admin, "/api/clusters/", pieces)
    assert status == 201 and body["name"] == "chunked" and body["description"] == "x", body
    status, body = post_chunked(site["base"], admin, "/api/clusters/", [b" " * 2**20] * 17)
    assert status == 413 and "NUMAWEB_MAX_UPLOAD_BYTES" in body["detail"], body
