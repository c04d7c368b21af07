"""The screenshots command's capture step against the live server: seven real PNGs."""

import struct

import pytest

from numaweb.inventory.models import Node
from numaweb.jobs.models import Job
from numaweb.pages.management.commands.screenshots import Command, take_screenshots
from numaweb.scheduling import services
from numaweb.scheduling.models import SchedulingSession

pytestmark = pytest.mark.browser


def test_take_screenshots_writes_pngs(browser, live_server, demo, tmp_path, make_user):
    session = SchedulingSession.objects.create(cluster=demo, profile="volcano", dry_run=True)
    session.jobs.set(Job.objects.all())
    session = services.execute_session(session.pk)
    node = Node.objects.get(name="srv-gpu-1")
    comparison = Command._comparison(demo)
    assert comparison.status == "done"
    written = take_screenshots(browser, live_server.url, node, session, tmp_path / "shots", comparison=comparison,
                               user=make_user("pat", "viewer"))
    assert [p.name for p in written] == ["dashboard.png", "node.png", "session.png", "cluster-map.png",
                                         "jobs.png", "pod-search.png", "comparison.png", "headroom.png"]
    for path in written:
        head = path.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", head[16:24])
        assert width >= 1000 and height >= 600
