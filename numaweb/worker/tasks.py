"""The ping task and the worker's start and stop: a worker that is ready to consume starts its housekeeping
thread and its pool's stall watch (numaweb.worker.stall); one that stops ends them and deletes its heartbeat, so
/healthz tells at once."""

import logging
import os

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown, worker_shutting_down

from .housekeeping import Housekeeping
from .runs import worker_id
from .stall import Watch

log = logging.getLogger("numaweb.worker")


@shared_task(name="numaweb.ping", ignore_result=False)
def ping() -> str:
    """A trivial task to check that a worker consumes the queue."""
    return "pong"


_housekeeping: list[Housekeeping] = []  # the running Housekeeping thread of this worker process, if any
_watches: list[Watch] = []  # and its pool's stall watch


@worker_ready.connect
def _worker_started(sender: object = None, **_kwargs: object) -> None:
    name = getattr(sender, "hostname", None) or worker_id()
    pool = getattr(getattr(sender, "controller", None), "pool", None)
    log.info("worker %s started (pid %s, pool %s, concurrency %s)", name, os.getpid(),
             type(pool).__module__.rsplit(".", 1)[-1], getattr(pool, "limit", "?"), extra={"worker": name})
    thread = Housekeeping(name)
    thread.start()
    _housekeeping.append(thread)
    if type(pool).__module__.endswith(".prefork"):
        watch = Watch(name, getattr(pool, "limit", None) or 1)
        watch.start()
        _watches.append(watch)


@worker_shutting_down.connect
def _worker_asked_to_stop(**_kwargs: object) -> None:
    """A warm shutdown lets running tasks end while it starts no new ones: not a wedged pool."""
    while _watches:
        _watches.pop().stop()


@worker_shutdown.connect
def _worker_stopping(**_kwargs: object) -> None:
    _worker_asked_to_stop()
    while _housekeeping:
        thread = _housekeeping.pop()
        try:
            thread.stop()
        except Exception:  # the database may be gone too: the heartbeat then simply times out
            log.exception("could not delete the heartbeat of worker %s", thread.worker_name)
        log.info("worker %s stopped (pid %s)", thread.worker_name, os.getpid(), extra={"worker": thread.worker_name})
