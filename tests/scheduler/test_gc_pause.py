"""The cyclic collector is paused while a session runs and restored after, also on errors and when nested."""

import gc

import pytest

from scheduler_core.bench import make_cluster, make_jobs
from scheduler_core.errors import RequestError
from scheduler_core.scheduler.gc_pause import paused_gc
from scheduler_core.scheduler.session import run_session


def test_paused_and_restored_also_nested_and_on_errors():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it paused and leaves it so
    assert gc.isenabled()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # a caller who had it off keeps it off
    finally:
        gc.enable()


def test_session_runs_with_the_collector_paused():
    seen = []
    result = run_session(make_cluster(4), make_jobs(6), progress=lambda done, total: seen.append(gc.isenabled()))
    assert seen and not any(seen) and gc.isenabled()
    assert result.counts["pods"] == 6
    with pytest.raises(RequestError):
        run_session("not a cluster", [])
    assert gc.isenabled()
