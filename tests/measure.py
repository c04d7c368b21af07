"""CPU time and peak memory of one call, in this process (the server, for Django's test client).

CPU time of the calling thread, not wall time: the suite shares a loaded machine, and the hostile inputs
this guards against cost seconds of CPU (a 1 << 4e9 mask, a million pods built), not waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MiB = 2**20


def _status(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


@dataclass
class Measured:
    result: Any
    seconds: float  # CPU seconds of this thread
    growth: int  # peak resident memory during the call minus resident memory before it, bytes


def measure(call: Callable[[], Any]) -> Measured:
    """Reset the peak-RSS mark (/proc/self/clear_refs 5), run `call`, read the new peak."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    before = _status("VmRSS")
    start = time.thread_time()
    result = call()
    seconds = time.thread_time() - start
    return Measured(result, seconds, _status("VmHWM") - before)
