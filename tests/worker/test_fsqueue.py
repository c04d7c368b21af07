"""The embedded queue delivers every message whole, even when a reader polls while a writer writes
(kombu's own file-system transport can hand a reader an empty file and lose that message)."""

import multiprocessing
from pathlib import Path

from kombu import Connection

import numaweb.celery  # noqa: F401  (registers the numaweb-fs transport)

MESSAGES = 1500


def _options(folder) -> dict:
    """The test's folders only: kombu's default control folder is `control/` in the working directory (a
    committed `control/race.exchange` came from there)."""
    return {"data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False,
            "control_folder": str(Path(folder) / "control"), "polling_interval": 0.001}


def _write(folder, start: int, count: int) -> None:
    """Runs in a spawned process, which imports this module (and so registers the transport) first."""
    with Connection("numaweb-fs://", transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("race")
        for i in range(start, start + count):
            queue.put({"n": i, "pad": "x" * 2048})


def test_reader_racing_two_writers_gets_every_message(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_write, args=(tmp_path, k * MESSAGES, MESSAGES)) for k in range(2)]
    for w in writers:
        w.start()
    seen = []
    with Connection("numaweb-fs://", transport_options=_options(tmp_path)) as conn:
        queue = conn.SimpleQueue("race")
        while len(seen) < 2 * MESSAGES:
            message = queue.get(timeout=60)
            seen.append(message.payload["n"])
            message.ack()
    for w in writers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert sorted(seen) == list(range(2 * MESSAGES))
    assert not list(tmp_path.glob("*.part")), "no half-written message is left behind"
