"""The README as a newcomer follows it: every shell block runs as written, against the server `./dev run` starts
(`manage.py serve`, here on a free port and a scratch data folder, its worker included), from a folder that
holds the repository's files; the engine's Python example runs too. A block is skipped only when the line
before it says why (`<!-- not run by tests/web/test_readme.py: ... -->`: it starts a server itself, or needs
Docker or a real cluster). Every curl must succeed: the blocks run with `set -euo pipefail` and curl failing on
an HTTP error. The README lists every management command and its Layout block matches the tree."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SKIP = re.compile(r"<!-- not run by tests/web/test_readme\.py: (.+?) -->\s*$")
# the only change made to a block: the port the test's server listens on
ADDRESS = "127.0.0.1:8000"


def blocks(language: str) -> list[tuple[int, str, str | None]]:
    """(line, code, why skipped or None) of every fenced block in `language`."""
    out, lines = [], README.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"```{language}":
            end = lines.index("```", i + 1)
            previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            skip = SKIP.search(previous)
            out.append((i + 1, "\n".join(lines[i + 1:end]), skip.group(1) if skip else None))
    return out


def health(base: str) -> int:
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`./dev run` on a free port: migrate, static files, demo data, admin and token, gunicorn and a worker."""
    folder = tmp_path_factory.mktemp("readme")
    work = folder / "clone"
    work.mkdir()
    for entry in ROOT.iterdir():  # the repository's files, without the outputs of the examples landing in it
        if entry.name not in (".venv", ".git", "var"):
            (work / entry.name).symlink_to(entry)
    (work / ".venv").symlink_to(Path(sys.prefix))  # the environment ./dev made (the one running these tests)
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    # a fresh shell: the project's environment is not on PATH, so a block reaches it as the README says
    # (`. .venv/bin/activate`), or fails with "No module named 'django'" as a newcomer's would
    venv_bin = Path(sys.executable).parent.resolve()
    path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != venv_bin]
    env = {k: v for k, v in env.items() if k != "VIRTUAL_ENV"}
    env.update(NUMAWEB_DATA_DIR=str(folder / "data"), WEB_CONCURRENCY="1", PYTHONUNBUFFERED="1",
               PATH=os.pathsep.join(path))
    log = folder / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "serve", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, f"manage.py serve exited:\n{log.read_text()[-4000:]}"
            try:
                if health(base) == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the server did not become healthy:\n{log.read_text()[-4000:]}"
            time.sleep(0.5)
        yield {"port": port, "env": env, "cwd": work, "log": log}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def run_block(server: dict, code: str) -> subprocess.CompletedProcess:
    script = "curl() { command curl --fail-with-body -sS \"$@\"; }\n" + code.replace(ADDRESS,
                                                                                   f"127.0.0.1:{server['port']}")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=server["cwd"], env=server["env"],
                          capture_output=True, text=True, timeout=300)


def is_api(code: str) -> bool:
    return "$API/sessions/" in code


def test_a_fresh_shell_needs_the_environment_the_readme_names(server):
    """Without `. .venv/bin/activate` the commands fail as the issue found them; with it they run."""
    plain = run_block(server, "python manage.py check_worker --help")
    assert plain.returncode != 0 and ("No module named 'django'" in plain.stderr or "not found" in plain.stderr)
    assert run_block(server, ". .venv/bin/activate\npython manage.py check_worker --help").returncode == 0


@pytest.mark.parametrize(("line", "code"), [(line, code) for line, code, skip in blocks("sh")
                                            if skip is None and not is_api(code)],
                         ids=lambda v: f"line-{v}" if isinstance(v, int) else None)
def test_shell_block_runs_as_written(server, line, code):
    """Each block but the API one (which creates objects: the next test runs it, once)."""
    done = run_block(server, code)
    assert done.returncode == 0, f"README line {line}:\n{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def test_api_examples_reach_every_step(server):
    """The API block runs; its session finished and its explanation was saved; the CSV export is CSV."""
    (line, code), = [(line, code) for line, code, skip in blocks("sh") if is_api(code) and skip is None]
    done = run_block(server, code)
    assert done.returncode == 0, f"README line {line}:\n{done.stderr}"
    explanation = json.loads((server["cwd"] / "session.json").read_text())
    assert explanation["schema"] == "numaweb.session/1", list(explanation)
    header = done.stdout.index("comparison,variant,label")  # the CSV, exported once every variant is done
    rows = done.stdout[header:].splitlines()[1:5]
    assert len(rows) == 4 and all(",done,," in row for row in rows), rows
    assert '"name":"node-9"' in done.stdout.replace(" ", "")


def test_python_example_runs():
    (line, code, _), = blocks("python")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"README line {line}:\n{done.stderr}"
    assert "{" in done.stdout


def test_skipped_blocks_say_why_and_are_few():
    skipped = [skip for _, _, skip in blocks("sh") if skip]
    assert len(skipped) == 4, skipped  # set-up, Redis/PostgreSQL, Docker, a real cluster


def test_every_management_command_is_listed():
    section = README[README.index("## Management commands"):README.index("## Layout")]
    commands = {p.stem for p in ROOT.glob("numaweb/*/management/commands/*.py") if not p.stem.startswith("_")}
    assert commands
    missing = sorted(c for c in commands if f"| `{c}" not in section)
    assert not missing, missing


def test_layout_block_matches_the_tree():
    block = README[README.index("## Layout"):]
    block = block[block.index("```\n") + 4:block.index("\n```", block.index("```\n") + 4)]
    named = set(re.findall(r"(?:^|\s)([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?)(?=\s|$)", block, re.M))
    named = {n.rstrip("/") for n in named if "/" in n or "." in n or (ROOT / n).exists()}
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split())
    top = {path.split("/")[0] for path in tracked} - {".gitignore", "README.md"}
    assert top <= {n.split("/")[0] for n in named}, sorted(top - {n.split("/")[0] for n in named})
    for entry in (n for n in named if n.split("/")[0] in top):
        assert (ROOT / entry).exists(), f"the Layout block names {entry}, which is not in the tree"
