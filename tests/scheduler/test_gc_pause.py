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


def _cycle() -> list:
    node: list = []
    node.append(node)
    return node


def test_what_the_block_made_is_promoted_not_traversed_and_its_cycles_still_collected():
    gc.collect()
    with paused_gc():
        made = [{"verdict": i} for i in range(5000)]
        _cycle()  # garbage once made: only the collector can free it
    assert gc.get_count()[0] < 700, "the young generation should be empty after the block"
    assert gc.get_freeze_count() == 0
    assert gc.collect() >= 1  # the cycle, found by a full collection
    assert len(made) == 5000


def test_a_process_that_froze_its_objects_keeps_them_frozen():
    """A frozen object is in no generation (`gc.get_objects()` lists the generations only) and stays so.
    The freeze count itself may drop meanwhile: a frozen object freed by reference counting leaves it."""
    marker = [[]]
    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0
        with paused_gc():
            _made = [[] for _ in range(1000)]
        assert gc.get_freeze_count() > 0
        assert not any(o is marker for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is marker for o in gc.get_objects())  # the check above could have failed
