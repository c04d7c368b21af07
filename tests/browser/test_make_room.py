"""Make room in a real browser on the fragmented cluster (tests/scheduler/room_clusters.py): the job page of
a 16-CPU single-numa-node gang of 4 that fits nowhere has a Make room button; a real worker answers,
the page polls until the plan is drawn: 4 moves, proven the fewest, each freed NUMA node drawn
before (a moved pod's CPUs highlighted) and after (the target's 16 CPUs), and the downloads."""

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from numaweb.room.models import RoomPlan
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = pytest.mark.browser


def test_make_room_from_the_job_page(page: Page, live_server, transactional_db, worker):
    fragmented_rows()
    job = gang_job()
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    page.locator("#make-room-form button[type=submit]").click()
    page.wait_for_url("**/make-room/*/", timeout=15000)
    body = page.locator("#room-body")
    expect(body).to_have_attribute("data-status", "done", timeout=60000)  # polled, no reload
    verdict = page.locator(".room-verdict")
    expect(verdict).to_have_attribute("data-moves", "4")
    expect(verdict).to_contain_text("proven the fewest")
    expect(verdict).to_contain_text("0 TopologyAffinityErrors")
    row = RoomPlan.objects.get()
    moves = row.result["moves"]
    expect(page.locator("table.room-moves tbody tr")).to_have_count(4)
    for m in moves:
        node = page.locator(f".room-node[data-node='{m['from_node']}']")
        before = node.locator("[data-side=before]")
        after = node.locator("[data-side=after]")
        numa = m["from_numa"][0]
        # before: the moved pod's CPUs highlighted on the NUMA node it leaves
        for cpu in m["from_cpus"].split(","):
            expect(before.locator(f"[data-numa='{numa}'] [data-cpu='{cpu}']")).to_have_class("room-cell st-moved")
        # after: that NUMA node is the target's, all 16 CPUs
        expect(after.locator(f"[data-numa='{numa}'] .st-target")).to_have_count(16)
        arrived = page.locator(f".room-node[data-node='{m['to_node']}'] [data-side=after] .st-moved")
        expect(arrived.first).to_be_visible()
    # the downloads
    with page.expect_download() as download:
        page.get_by_role("link", name="kubectl script").click()
    assert download.value.suggested_filename == f"make-room-{row.pk}.sh"
    text = Path(download.value.path()).read_text()
    assert text.count("step put batch") == 4
    with page.expect_download() as download:
        page.get_by_role("link", name="JSON").click()
    assert download.value.suggested_filename == f"make-room-{row.pk}.json"
    # the job page links the answer
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    expect(page.locator(".make-room")).to_contain_text(f"#{row.pk} (done: 4 moves)")
