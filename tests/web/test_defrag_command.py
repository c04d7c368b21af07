"""`manage.py defrag CLUSTER`: ranks the pending jobs in-process and prints the proposal; exit 0 with one, 1
without, 2 on bad input naming the option."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from numaweb.room.models import DefragRun
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("defrag", *args, stdout=out)
    return out.getvalue()


def test_conflicting_jobs_and_the_proposal_that_places_both():
    fragmented_rows("frag", nodes=2)
    gang_job("train-a", pods=1)
    gang_job("train-b", pods=1)
    text = run("frag")
    assert "2 pending jobs ranked, profile aligned" in text
    assert "1. default/train-a: 1 moves (2 CPUs); conflicts with default/train-b" in text
    row = DefragRun.objects.get()
    assert f"proposal: default/train-a, default/train-b after 2 moves (4 CPUs); verified by dry-run session " \
           f"{row.session_id} (2 pods placed, 0 TopologyAffinityErrors)" in text
    assert text.count("-> node-") == 2


def test_json_and_no_proposal_exits_1():
    fragmented_rows("frag", nodes=1)
    gang_job("train", pods=1)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("defrag", "frag", "--protect", "batch", "--json", stdout=out)
    assert exit_.value.code == 1
    data = json.loads(out.getvalue())
    assert data["status"] == "done" and data["proposal"]["jobs"] == [] and data["jobs"][0]["found"] is False


@pytest.mark.parametrize(("args", "message"), [
    (("nowhere",), "cluster: no cluster 'nowhere'"),
    (("frag", "--profile", "fast"), "--profile: unknown profile 'fast'"),
    (("frag", "--max-moves", "0"), "--max-moves: must be from 1"),
])
def test_bad_input_exits_2_naming_the_option(args, message):
    fragmented_rows("frag", nodes=1)
    gang_job("train", pods=1)
    with pytest.raises(CommandError) as error:
        run(*args)
    assert str(error.value).startswith(message) and error.value.returncode == 2
    assert not DefragRun.objects.exists()


def test_a_cluster_without_pending_jobs_exits_2():
    fragmented_rows("frag", nodes=1)
    with pytest.raises(CommandError) as error:
        run("frag")
    assert "has no pending jobs" in str(error.value) and error.value.returncode == 2
