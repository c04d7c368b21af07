"""`manage.py make_room`: answers in-process and prints the plan; exit codes and errors name the option."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from numaweb.room.models import RoomPlan
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("make_room", *args, stdout=out)
    return out.getvalue()


def test_a_job_by_name_fits_after_four_moves():
    fragmented_rows("frag")
    gang_job("train")
    text = run("--cluster", "frag", "--job", "train")
    assert "fits after 4 moves (8 CPUs), proven the fewest" in text and "0 TopologyAffinityErrors" in text
    assert text.count("-> node-") == 4
    row = RoomPlan.objects.get()
    assert row.status == "done" and row.session is not None and row.session.dry_run


def test_a_shape_as_json():
    fragmented_rows("frag")
    data = json.loads(run("--cluster", "frag", "--cpu", "16", "--memory", "1Gi", "--count", "2",
                          "--policy", "single-numa-node", "--json"))
    assert data["found"] and len(data["moves"]) == 2 and data["minimal"]


def test_no_plan_exits_1():
    fragmented_rows("frag", nodes=1)
    gang_job("train", pods=3)
    with pytest.raises(SystemExit) as exit_info:
        run("--cluster", "frag", "--job", "train")
    assert exit_info.value.code == 1


@pytest.mark.parametrize(("args", "message"), [
    (("--cluster", "nope", "--job", "train"), "--cluster: no cluster"),
    (("--cluster", "frag", "--job", "nope"), "--job: no job named"),
    (("--cluster", "frag"), "--job NAME, or --cpu N"),
    (("--cluster", "frag", "--cpu", "16"), "--count"),
    (("--cluster", "frag", "--cpu", "16", "--count", "1", "--profile", "fast"), "--profile"),
])
def test_bad_options_name_the_option(args, message):
    fragmented_rows("frag", nodes=1)
    gang_job("train")
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert not RoomPlan.objects.exists()
