"""Throwaway servers the tests start on free ports of 127.0.0.1 and delete afterwards: PostgreSQL (Debian's
server binaries, initdb on a scratch folder, trust auth; as the `postgres` user under root, since PostgreSQL
refuses to run as root) and Redis (restartable, with its data folder kept across restarts)."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bindir() -> Path:
    """The newest Debian server (/usr/lib/postgresql/N/bin), else the folder of initdb/pg_ctl on PATH."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        def version(path: str) -> tuple[int, ...]:
            return tuple(int(x) for x in re.findall(r"\d+", path.split("/")[-3]))

        return Path(max(found, key=version)).parent
    for name in ("initdb", "pg_ctl"):
        path = shutil.which(name)
        if path:
            return Path(path).resolve().parent
    raise AssertionError("PostgreSQL server binaries are required (apt-get install -y postgresql, or ./dev test)")


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Start a private PostgreSQL server; yields its admin URL (user postgres, trust auth, 127.0.0.1)."""
    bindir = postgres_bindir()
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    # not under pytest's tmp_path: its parents are private to root, the postgres user could not enter them
    base = Path(tempfile.mkdtemp(prefix="numaweb-pg-"))
    data, log = base / "data", base / "server.log"
    if as_root:
        shutil.chown(base, "postgres", "postgres")

    def run(*args: str) -> None:
        done = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, cwd=base)
        assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}{done.stderr}" + (
            log.read_text(errors="replace") if log.exists() else "")

    started = False
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync")
        port = free_port()
        options = f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
        started = True
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


class RedisServer:
    """redis-server with the given arguments (e.g. docker-compose's), on a free port of 127.0.0.1 with its data
    in `folder`; `restart()` stops it (SIGTERM: it writes what it must, as on `docker compose restart`) and
    starts it again on the same port and folder."""

    def __init__(self, folder: Path, args: Sequence[str] = ("--save", "", "--appendonly", "no")) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is required (apt-get install -y redis-server)"
        self.folder, self.port = folder, free_port()
        folder.mkdir(parents=True, exist_ok=True)
        # the address, port and folder are the test's, whatever `args` say (redis checks a --dir at once)
        args = list(args)
        for option in ("--dir", "--port", "--bind"):
            while option in args:
                del args[args.index(option):args.index(option) + 2]
        self.command = [binary, *args, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(folder),
                        "--daemonize", "no", "--logfile", str(folder / "redis.log")]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(self.command)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return
            except redis.ConnectionError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        log = self.folder / "redis.log"
        raise AssertionError(f"redis-server did not start: {log.read_text() if log.exists() else ''}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def redis_server(folder: Path, args: Sequence[str] = ("--save", "", "--appendonly", "no")) -> Iterator[RedisServer]:
    server = RedisServer(folder, args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def product_web_server(env: dict[str, str], log: Path) -> Iterator[str]:
    """The web server `manage.py serve` starts (its `web_command`: gunicorn with numaweb.gunicorn_conf, uvicorn's
    event loop in each process) on a free port, with `env` (a migrated database); yields its base URL."""
    import urllib.error
    import urllib.request

    from numaweb.scheduling.management.commands.serve import web_command

    root = Path(__file__).resolve().parents[1]
    base = f"http://127.0.0.1:{free_port()}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(web_command(base.removeprefix("http://")), cwd=root, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5).close()
                break
            except urllib.error.HTTPError:  # 503: no worker, which a web server alone does not need
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
