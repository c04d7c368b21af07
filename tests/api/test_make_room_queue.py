"""Issue 37, row 7 (queued questions): make-room questions waiting or being answered are capped per user
(NUMAWEB_MAKE_ROOM_QUEUED_PER_USER) and per cluster (NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER): one more is refused
with 429, naming the limit and its setting, with Retry-After, and nothing is recorded; once one is answered
there is room again. Before, 30 queued questions made a 1-pod session wait 85 s."""

from __future__ import annotations

import pytest
from django.urls import reverse

from numaweb.room.models import RoomPlan
from numaweb.worker import runs
from tests.web.helpers import make_node

QUESTION = {"shape": {"cpu": "2"}, "count": 1}


@pytest.fixture
def sent(monkeypatch):
    out: list[int] = []
    monkeypatch.setattr(runs, "send", lambda task, ids, countdown=None: out.extend(ids))
    return out


@pytest.fixture
def limits(settings, cluster):
    make_node(cluster, "n1")
    settings.NUMAWEB_MAKE_ROOM_QUEUED_PER_USER = 2
    settings.NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER = 3
    return cluster


def ask(client, cluster):
    return client.post(f"/api/clusters/{cluster.pk}/make-room/", QUESTION, format="json")


def test_queued_questions_are_capped_per_user_then_per_cluster(limits, sent, operator_api, api):
    cluster = limits
    assert [ask(operator_api, cluster).status_code for _ in range(2)] == [202, 202]
    refused = ask(operator_api, cluster)
    assert refused.status_code == 429 and refused.headers["Retry-After"].isdigit()
    assert refused.json()["limit"] == "NUMAWEB_MAKE_ROOM_QUEUED_PER_USER"
    assert refused.json()["detail"].startswith("you have 2 make-room questions waiting or being answered, the most "
                                               "allowed (NUMAWEB_MAKE_ROOM_QUEUED_PER_USER)")
    assert RoomPlan.objects.count() == 2  # nothing recorded

    assert ask(api, cluster).status_code == 202  # another user: the cluster's third
    refused = ask(api, cluster)
    assert refused.status_code == 429 and refused.json()["limit"] == "NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER"
    assert f"cluster {cluster.name} has 3 make-room questions" in refused.json()["detail"]

    RoomPlan.objects.filter(pk=RoomPlan.objects.order_by("pk").first().pk).update(status="done")  # one answered
    assert ask(operator_api, cluster).status_code == 202
    assert RoomPlan.objects.filter(status="pending").count() == 3


def test_the_page_refuses_the_same_way(limits, sent, operator_client, settings):
    settings.NUMAWEB_MAKE_ROOM_QUEUED_PER_USER = 1
    data = {"cluster": limits.pk, "cpu": "2", "count": "1"}
    assert operator_client.post(reverse("room:start"), data).status_code == 302
    refused = operator_client.post(reverse("room:start"), data)
    assert refused.status_code == 429 and "(NUMAWEB_MAKE_ROOM_QUEUED_PER_USER)" in refused.content.decode()
    assert RoomPlan.objects.get().requested_by.username == "olga"


def test_the_command_refuses_naming_the_limit(limits, sent, settings):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER = 1
    RoomPlan.objects.create(cluster=limits, count=1, shape={"cpu": "2"})
    with pytest.raises(CommandError, match=r"\(NUMAWEB_MAKE_ROOM_QUEUED_PER_CLUSTER\)"):
        call_command("make_room", "--cluster", limits.name, "--cpu", "2", "--count", "1", "--queue")
