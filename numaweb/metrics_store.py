"""Where the web processes keep their request histograms (prometheus_client's multiprocess mode), one folder per
server so that two servers in one checkout never wipe each other's, and stale ones removed at start-up.

Every gunicorn master (numaweb/gunicorn_conf.py, so `./dev run`, compose and Kubernetes alike) takes
`<base>/server-<host>-<its pid>`, base being PROMETHEUS_MULTIPROC_DIR or `<data folder>/metrics`, and hands it to
its workers. Before that it removes the folders of this host's servers that no longer run (another host's, on a
shared volume, it cannot judge and leaves) and any loose file an older version left in the base: a crashed
server's metrics cannot accumulate. `manage.py serve` sweeps first of all, before it
migrates, so a disk that metrics once filled is given back before anything needs it. The files themselves are
bounded because every label comes from a closed set (numaweb.metrics). prometheus_client writes them through
memory maps, and a write to a map on a full disk kills the process (SIGBUS): with less than MIN_FREE_BYTES free
after the sweep, a server keeps its histograms in memory, per process, and says so, instead of crashing."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

MIN_FREE_BYTES = 64 * 2**20
PREFIX = "server-"


def base_folder() -> Path:
    """PROMETHEUS_MULTIPROC_DIR when set, else `metrics` in the data folder (NUMAWEB_DATA_DIR, as settings)."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        return Path(given)
    return Path(os.environ.get("NUMAWEB_DATA_DIR") or Path(__file__).resolve().parent.parent / "var") / "metrics"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: running
        return True
    return True


def folder_name(pid: int) -> str:
    return f"{PREFIX}{socket.gethostname()}-{pid}"


def sweep(base: Path) -> None:
    """Remove what no running server uses: folders of this host's servers whose process is gone, loose files."""
    if not base.is_dir():
        return
    host = socket.gethostname()
    for entry in base.iterdir():
        if entry.is_dir() and entry.name.startswith(PREFIX):
            owner, _, pid = entry.name.removeprefix(PREFIX).rpartition("-")
            if owner != host or (pid.isdigit() and int(pid) != os.getpid() and _running(int(pid))):
                continue
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.is_file():
            entry.unlink(missing_ok=True)


def claim(base: Path, pid: int) -> Path | None:
    """Sweep `base`, then make and return this server's own empty folder; None (histograms per process, in
    memory) when the disk has less than MIN_FREE_BYTES free or the folder cannot be made."""
    try:
        base.mkdir(parents=True, exist_ok=True)
        sweep(base)
        if shutil.disk_usage(base).free < MIN_FREE_BYTES:
            print(f"numaweb: less than {MIN_FREE_BYTES >> 20} MiB free under {base}: request metrics are kept per "
                  "process in memory until the server is started with more room", file=sys.stderr)
            return None
        folder = base / folder_name(pid)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    except OSError as exc:
        print(f"numaweb: no metrics folder under {base} ({exc}): request metrics are kept per process in memory",
              file=sys.stderr)
        return None
    return folder
