"""Slow clients against a running server: `python -m benchmarks.slow_clients http://127.0.0.1:8000 [--slow 200]
[--seconds 60] [--body] [--big-bodies 120] [--clients 50] [--pid GUNICORN_PID]`.

`--slow` connections each send a request line and then their headers one byte every `--interval` seconds (with
`--body`: complete headers declaring a body, then the body one byte at a time), for `--seconds`; a connection the
server closes is opened again, so the pressure holds. `--big-bodies` more connections each declare a 16 MiB body,
send all but its last KiB at once and then trickle (what the server holds for them is what `--pid` measures: the
largest total resident memory of that process and its children, sampled every second). `--clients` clients each
ask `--path` back to back on fresh connections for the whole time and count errors. Meanwhile one client asks
`--path` (default /healthz) four times a second on fresh connections and prints the latency percentiles and how
many probes failed or timed out: what another user sees while the slow clients hold on. `probe()` is what
tests/stack and tests/web call."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import http.client
import statistics
import threading
import time
import urllib.parse
from pathlib import Path

BIG = 16 * 2**20


async def _slow_client(host: str, port: int, stop: float, interval: float, body: bytes | None, stats: dict) -> None:
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            stats["refused"] += 1
            await asyncio.sleep(interval)
            continue
        stats["opened"] += 1
        try:
            if body is not None:
                writer.write(body)
            else:
                writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            while time.monotonic() < stop and not reader.at_eof():
                writer.write(b"a")
                await writer.drain()
                try:  # the server may answer (408, 400) or close: then open another connection
                    if await asyncio.wait_for(reader.read(1), timeout=interval):
                        stats["answered"] += 1
                        break
                except TimeoutError:
                    pass
        except OSError:
            pass
        finally:
            writer.close()


def _body_request(host: str, port: int) -> bytes:
    """The login form's POST with a valid CSRF cookie (asked for first), so the server must read the body to
    check the form's token: nothing can refuse the request before its body is in."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/login/")
    response = conn.getresponse()
    response.read()
    cookie = response.getheader("Set-Cookie", "").split(";", 1)[0]
    conn.close()
    return (f"POST /login/ HTTP/1.1\r\nHost: localhost\r\nCookie: {cookie}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n").encode()


def _probe_once(host: str, port: int, path: str, timeout: float) -> float | None:
    started = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        conn.getresponse().read()
        return time.monotonic() - started
    except OSError:
        return None
    finally:
        conn.close()


async def _big_body(host: str, port: int, stop: float, interval: float, stats: dict) -> None:
    """Declare a 16 MiB body to the token endpoint, send all but its last KiB, then trickle the rest."""
    head = (f"POST /api/auth-token/ HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {BIG}\r\n\r\n").encode()
    chunk = b" " * 2**20
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            stats["big_refused"] += 1
            await asyncio.sleep(interval)
            continue
        stats["big_opened"] += 1
        try:
            writer.write(head)
            for _ in range(BIG // len(chunk) - 1):
                writer.write(chunk)
                await writer.drain()
            writer.write(b" " * (len(chunk) - 1024))
            await writer.drain()
            stats["big_sent"] += 1
            while time.monotonic() < stop and not reader.at_eof():
                writer.write(b" ")
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(1), timeout=interval):
                        stats["big_answered"] += 1
                        break
                except TimeoutError:
                    pass
        except OSError:
            pass
        finally:
            writer.close()


def _busy_client(host: str, port: int, path: str, stop: float, timeout: float, stats: dict,
                 lock: threading.Lock) -> None:
    while time.monotonic() < stop:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Connection": "close"})
            status = conn.getresponse().status
            ok = status < 500
        except OSError:
            ok = False
        finally:
            conn.close()
        with lock:
            stats["client_requests"] += 1
            stats["client_errors"] += not ok


def _rss_mib(pid: int) -> float:
    """Resident memory of `pid` and its children (MiB)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if stat.parent.name == str(pid) or fields[1] == str(pid):
                total += int(fields[21])  # rss, pages
        except (OSError, IndexError, ValueError):
            continue
    return total * 4096 / 2**20


async def _run(base: str, slow: int, seconds: float, interval: float, body: bool, path: str,
               timeout: float, big: int = 0, clients: int = 0, pid: int | None = None) -> dict:
    url = urllib.parse.urlsplit(base)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    stop = time.monotonic() + seconds
    stats = {"opened": 0, "refused": 0, "answered": 0, "big_opened": 0, "big_sent": 0, "big_refused": 0,
             "big_answered": 0, "client_requests": 0, "client_errors": 0, "rss_mib": 0.0}
    request = _body_request(host, port) if body else None
    tasks = [asyncio.create_task(_slow_client(host, port, stop, interval, request, stats)) for _ in range(slow)]
    tasks += [asyncio.create_task(_big_body(host, port, stop, interval, stats)) for _ in range(big)]
    lock = threading.Lock()
    workers = [threading.Thread(target=_busy_client, args=(host, port, path, stop, timeout, stats, lock))
               for _ in range(clients)]
    for worker in workers:
        worker.start()

    async def sample() -> None:
        while pid and time.monotonic() < stop:
            stats["rss_mib"] = max(stats["rss_mib"], _rss_mib(pid))
            await asyncio.sleep(1)

    tasks.append(asyncio.create_task(sample()))
    await asyncio.sleep(min(2.0, seconds / 4))  # let them all connect first
    latencies: list[float] = []
    failed = 0
    loop = asyncio.get_running_loop()
    while time.monotonic() < stop:
        took = await loop.run_in_executor(None, _probe_once, host, port, path, timeout)
        if took is None:
            failed += 1
        else:
            latencies.append(took)
        await asyncio.sleep(0.25)
    await asyncio.gather(*tasks, return_exceptions=True)
    for worker in workers:
        worker.join()
    ordered = sorted(latencies) or [float("inf")]
    return {"slow": slow, "seconds": seconds, "probes": len(latencies) + failed, "failed": failed,
            "p50": statistics.median(ordered), "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "max": ordered[-1], **stats}


def probe(base: str, slow: int = 200, seconds: float = 60, interval: float = 3.0, body: bool = False,
          path: str = "/healthz", timeout: float = 10.0, big: int = 0, clients: int = 0,
          pid: int | None = None) -> dict:
    """Hold `slow` slow connections (and `big` stalled 16 MiB bodies, `clients` busy clients) on `base` for
    `seconds` while probing `path`: latencies in seconds. Runs its own event loop in a thread of its own (the
    caller may have one running, e.g. Playwright's)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(_run(base, slow, seconds, interval, body, path, timeout, big,
                                                    clients, pid))).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base")
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--interval", type=float, default=3.0)
    parser.add_argument("--body", action="store_true")
    parser.add_argument("--path", default="/healthz")
    parser.add_argument("--big-bodies", type=int, default=0)
    parser.add_argument("--clients", type=int, default=0)
    parser.add_argument("--pid", type=int, help="the server's (gunicorn master's) pid: its memory is sampled")
    args = parser.parse_args()
    out = probe(args.base, args.slow, args.seconds, args.interval, args.body, args.path, big=args.big_bodies,
                clients=args.clients, pid=args.pid)
    print(f"{out['slow']} slow connections ({'body' if args.body else 'headers'}) for {out['seconds']:.0f} s: "
          f"{out['probes']} probes of {args.path}, {out['failed']} failed; p50 {out['p50'] * 1000:.0f} ms, "
          f"p99 {out['p99'] * 1000:.0f} ms, max {out['max'] * 1000:.0f} ms; slow connections opened "
          f"{out['opened']}, answered or closed by the server {out['answered']}, refused {out['refused']}")
    if args.big_bodies:
        print(f"{args.big_bodies} stalled 16 MiB bodies: {out['big_opened']} opened, {out['big_sent']} sent all but "
              f"the last KiB, {out['big_answered']} answered by the server (408), {out['big_refused']} refused")
    if args.clients:
        print(f"{args.clients} clients: {out['client_requests']} requests, {out['client_errors']} errors "
              "(5xx or no answer)")
    if args.pid:
        print(f"server memory (pid {args.pid} and its children): at most {out['rss_mib']:.0f} MiB resident")


if __name__ == "__main__":
    main()
