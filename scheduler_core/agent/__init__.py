"""The node agent (`numaweb-agent`, `python -m scheduler_core.agent`): reads, read-only, what a node really
is and holds, and sends it to numaweb as one report.

What it reads: the machine from sysfs and proc (`formats.sysfs.load_host`: CPUs, cores, caches, NUMA
nodes, memory, hugepages, distances, PCI devices with NUMA node and class), the kubelet's checkpoints
under the kubelet root (`cpu_manager_state`, `memory_manager_state`,
`device-plugins/kubelet_internal_checkpoint`) and its configuration file. The checkpoints and the
configuration travel as the kubelet wrote them (the server parses them with the engine, so a bad file is
refused there with its reason); a file that is absent is sent as null, one that cannot be read is named
in `notes`.

The report (`REPORT_KIND`) is one JSON object: `cluster`, `node`, `time` (when it was read, UTC),
`agent`, `topology` (the engine's topology JSON), `pci_devices`, `kubelet` {config, cpu_manager_state,
memory_manager_state, device_checkpoint} and `notes`. It is sent with the standard library (urllib) as
`POST <server>/api/agent/reports/` with `Authorization: Token <token>`.

Sending: once (`--once`: up to `ONCE_ATTEMPTS` tries, exit 0 when applied, 1 when the server stayed
unreachable, 2 when it refused the report) or every `--interval` seconds for ever. A server that cannot be
reached (no connection, a timeout, 429 or 5xx) is tried again after 1 s, doubling up to `MAX_BACKOFF`
(and never longer than the interval); a refusal (400, 401, 403, 404, 413) is logged and the agent keeps
going with the next round, since only a change on the node or the server can fix it.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import EngineError
from ..formats import MAX_INPUT_BYTES
from ..formats.sysfs import load_host

REPORT_KIND = "numaweb.node-report/1"
VERSION = "1"
REPORT_PATH = "/api/agent/reports/"
ONCE_ATTEMPTS = 5
MAX_BACKOFF = 300.0
#: the kubelet's files, by report key: where they are under the kubelet root
CHECKPOINTS = {"cpu_manager_state": "cpu_manager_state", "memory_manager_state": "memory_manager_state",
               "device_checkpoint": "device-plugins/kubelet_internal_checkpoint"}


@dataclass(frozen=True)
class Options:
    server: str
    token: str
    cluster: str
    node_name: str
    sysfs: pathlib.Path = pathlib.Path("/sys")
    proc: pathlib.Path = pathlib.Path("/proc")
    kubelet_root: pathlib.Path = pathlib.Path("/var/lib/kubelet")
    kubelet_config: pathlib.Path = pathlib.Path("/var/lib/kubelet/config.yaml")
    interval: float = 60.0
    once: bool = False
    timeout: float = 30.0


class SendError(Exception):
    """A report that was not applied; `retry` when trying again later may succeed (the server was not
    reached, was busy or failed), not when it refused the report."""

    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


def _read(path: pathlib.Path, notes: list[str]) -> str | None:
    """A kubelet file's text, None when it does not exist (or cannot be read: noted)."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        notes.append(f"{path}: not read ({exc.strerror or exc})")
        return None
    if len(data) > MAX_INPUT_BYTES:
        notes.append(f"{path}: larger than {MAX_INPUT_BYTES} bytes, not sent")
        return None
    return data.decode("utf-8", "replace")


def collect(options: Options, now: datetime | None = None) -> dict[str, Any]:
    """One report of this node (see the module docstring); EngineError when sysfs cannot be read."""
    loaded = load_host(options.sysfs, options.proc)
    notes = list(loaded.notes)
    kubelet = {key: _read(options.kubelet_root / rel, notes) for key, rel in CHECKPOINTS.items()}
    kubelet["config"] = _read(options.kubelet_config, notes)
    return {
        "kind": REPORT_KIND,
        "cluster": options.cluster,
        "node": options.node_name,
        "time": (now or datetime.now(UTC)).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "agent": {"version": VERSION, "host": socket.gethostname()},
        "topology": loaded.topology.to_dict(),
        "pci_devices": loaded.extra.get("pci_devices", []),
        "kubelet": kubelet,
        "notes": notes,
    }


def send(report: dict[str, Any], server: str, token: str, timeout: float = 30.0) -> dict[str, Any]:
    """POST the report; the server's answer, or SendError saying whether to try again."""
    body = json.dumps(report, separators=(",", ":")).encode()
    request = urllib.request.Request(server.rstrip("/") + REPORT_PATH, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Token {token}",
        "User-Agent": f"numaweb-agent/{VERSION}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace").strip()
        retry = exc.code == 429 or exc.code >= 500
        raise SendError(f"{server}: HTTP {exc.code}: {detail or exc.reason}", retry) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SendError(f"{server}: {reason}", True) from None


def run(options: Options, sleep: Callable[[float], None] = time.sleep,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> int:
    """Send reports (once, or every interval for ever); the exit code with `once` (module docstring)."""
    backoff = 1.0
    attempts = 0
    while True:
        started = time.monotonic()
        try:
            answer = send(collect(options), options.server, options.token, options.timeout)
        except EngineError as exc:
            log(f"numaweb-agent: cannot read this node: {exc}")
            if options.once:
                return 2
            sleep(options.interval)
            continue
        except SendError as exc:
            attempts += 1
            log(f"numaweb-agent: report not applied: {exc}")
            if not exc.retry:
                if options.once:
                    return 2
                sleep(options.interval)
                continue
            if options.once and attempts >= ONCE_ATTEMPTS:
                return 1
            sleep(min(backoff, MAX_BACKOFF if options.once else min(MAX_BACKOFF, options.interval)))
            backoff *= 2
            continue
        backoff, attempts = 1.0, 0
        log(f"numaweb-agent: node {options.node_name} of {options.cluster}: "
            f"{'changed' if answer.get('changed') else 'unchanged'}"
            + (f"; {answer['check']['verdict']}" if isinstance(answer.get("check"), dict) else ""))
        if options.once:
            return 0
        sleep(max(0.0, options.interval - (time.monotonic() - started)))


def default_node_name() -> str:
    """The host name, as the kubelet names its node by default (`NODE_NAME` when the DaemonSet sets it)."""
    return os.environ.get("NODE_NAME") or socket.gethostname()
