"""Make room in the job's own terms (issue 31): without a profile a job is asked about with its last session's
profile and weight, and the answer says which (page, API, command); the plan's verifying dry run is marked as such
wherever sessions are listed and never shows on the job page as where its pods went; "no plan" names the real
reason or the bound with what raises it, and never claims more moves than the cluster could make."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from numaweb.inventory.models import Cluster
from numaweb.room import services
from numaweb.room.models import RoomPlan
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import SchedulingSession
from tests.web.helpers import make_job, make_node
from tests.web.room_rows import fragmented_rows, gang_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def best_effort():
    """Three best-effort nodes and a 2-CPU job with the single-numa-node task policy: aligned places it (the
    kubelet admits it there), volcano never does (its filter wants the node's policy to be the task's)."""
    cluster = Cluster.objects.create(name="be")
    for i in range(3):
        make_node(cluster, f"be-{i}", (1, 2, 4, 1), "best-effort")
    job = make_job("snn", cpus="2", policy="single-numa-node", cluster=cluster)
    return cluster, job


def volcano_session(cluster, job, weight: int = 1) -> SchedulingSession:
    """A volcano dry run of `job`, recorded as scored with the numa-aware `weight`."""
    session = scheduling.execute_session(scheduling.start_session(cluster, "volcano", True, [job]).pk)
    SchedulingSession.objects.filter(pk=session.pk).update(weight=weight)
    session.refresh_from_db()
    return session


def ask(cluster, **data) -> RoomPlan:
    row = RoomPlan.objects.create(**services.parse_request(cluster, data))
    return services.execute(row.pk)


def test_a_job_volcano_left_pending_is_answered_in_volcanos_terms(best_effort, client, api):
    cluster, job = best_effort
    assert services.parse_request(cluster, {"job": job.pk})["profile"] == "aligned"  # no session yet: the default
    session = volcano_session(cluster, job, weight=3)
    assert session.pods_placed == 0  # left pending by volcano's policy filter
    row = ask(cluster, job=job.pk)
    assert (row.profile, row.options["weight"], row.options["profile_from"]) == ("volcano", 3, session.pk)
    plan = row.result
    assert not plan["fits_now"] and not plan["found"] and plan["lower_bound"] == 0
    assert plan["reason"].startswith("no node can ever take a pod of it, even empty (0/3 nodes are unavailable: "
                                     "3 task topology policy[single-numa-node] is different with node[best-effort]")
    # asked with aligned, the same job fits now: the answer the form used to give whatever left it pending
    assert ask(cluster, job=job.pk, profile="aligned").result["fits_now"]
    # the API says which profile it used, and why
    body = api.get(f"/api/make-room/{row.pk}/").json()
    assert (body["profile"], body["weight"], body["profile_from"]) == ("volcano", 3, session.pk)
    assert body["profile_source"] == "the job's last session, the one that left it pending"
    assert body["reason"] == plan["reason"] and body["lower_bound"] == 0
    # the page too, with a link to that session, and no "at least N moves"
    page = client.get(f"/make-room/{row.pk}/").content.decode()
    assert 'data-profile="volcano"' in page and f'href="/sessions/{session.pk}/">session #{session.pk}</a>' in page
    assert "no node can ever take a pod of it" in page and "needs at least" not in page
    # the job page's form asks in the job's terms by default
    form = client.get(f"/jobs/{job.pk}/").content.decode()
    form = form[form.index('id="make-room-form"'):form.index("</form>", form.index('id="make-room-form"'))]
    assert f'<option value="" selected>as its last session: volcano (weight 3), #{session.pk}</option>' in form
    # the command too
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("make_room", "--cluster", "be", "--job", "snn", stdout=out)
    assert f"profile volcano, weight 3 (the job's last session, the one that left it pending #{session.pk})" \
        in out.getvalue()


def test_the_verifying_dry_run_is_marked_everywhere_sessions_are_listed(client, api):
    cluster = fragmented_rows(nodes=2)
    job = gang_job(pods=2)
    asked = scheduling.execute_session(scheduling.start_session(cluster, "aligned", True, [job]).pk)
    row = ask(cluster, job=job.pk)
    assert row.result["found"] and row.profile == "aligned" and row.options["profile_from"] == asked.pk
    check = row.session
    assert check.room_check and not asked.room_check and check.pods_placed == 2
    for url in ("/sessions/", "/"):
        html = client.get(url).content.decode()
        rows = {m.group(1): m.group(0) for m in re.finditer(r'<tr data-session="(\d+)".*?</tr>', html, re.S)}
        assert "make-room check (dry run)" in rows[str(check.pk)], url
        assert "make-room check" not in rows[str(asked.pk)], url
    listed = {s["id"]: s["room_check"] for s in api.get("/api/sessions/").json()["results"]}
    assert listed == {check.pk: True, asked.pk: False}
    assert api.get(f"/api/sessions/{check.pk}/").json()["room_check"] is True
    # the job page shows where its own session left its pods (none placed), not the check's placements
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "placed (dry run) on" not in page and f"explain (session {check.pk})" not in page
    assert f"explain (session {asked.pk})" in page
    # a later question still asks in the terms of the job's own session, not of the check
    assert services.last_session(job).pk == asked.pk


def test_no_plan_within_a_bound_names_it_and_what_raises_it(settings):
    cluster = fragmented_rows(nodes=2)
    job = gang_job(pods=2)
    settings.NUMAWEB_MAKE_ROOM_SECONDS = 0
    plan = ask(cluster, job=job.pk, profile="aligned").result
    assert not plan["found"] and plan["stats"]["bound"] == "time"
    from numaweb.room.export import room_dict

    reason = room_dict(RoomPlan.objects.latest("id"))["reason"]
    assert reason == "no plan within the time limit of 0 s; NUMAWEB_MAKE_ROOM_SECONDS raises the time limit"
    assert plan["lower_bound"] <= plan["stats"]["movable"]


def test_a_lower_bound_never_exceeds_the_pods_that_could_move():
    """Two fragmented nodes (a 2-CPU pod on each NUMA node) and a gang of two 16-CPU single-numa-node pods, which
    fits after 2 moves. With three of the four small pods pinned, moving the last one frees one NUMA node only:
    every set of the one movable pod is tried, and the answer says so (it used to read "any plan needs at least
    17 moves")."""
    cluster = fragmented_rows(nodes=2)
    job = gang_job(pods=2)
    row = ask(cluster, job=job.pk, profile="aligned", max_moves=16, pinned=["batch/small-0-*", "batch/small-1-0"])
    plan = row.result
    assert not plan["found"] and plan["stats"]["movable"] == 1 and plan["lower_bound"] == 0
    assert plan["reason"] == "moving any of the 1 movable pods does not make room (not movable: 3 pinned)"
    # without the pins the gang fits after two moves: the pods that could not move were the reason
    free = ask(cluster, job=job.pk, profile="aligned", max_moves=16).result
    assert free["found"] and len(free["moves"]) == 2
