"""While no worker is alive every page says so, and a pending session says it waits for one; the fragments
HTMX polls carry no banner (it would be swapped into the session's place), nor does the login page."""

from django.urls import reverse
from django.utils import timezone

from numaweb.inventory.models import Cluster
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.models import WorkerHeartbeat

BANNER = 'id="no-worker"'


def test_banner_and_pending_text_follow_the_worker_heartbeat(client, anon_client, demo):
    session = SchedulingSession.objects.create(cluster=Cluster.objects.get(name="demo"))
    for url in (reverse("home"), reverse("pages:jobs"), reverse("pages:sessions")):
        assert BANNER in client.get(url).content.decode(), url
    # the login page tells visitors nothing about the back end
    login = anon_client.get(reverse("login"))
    assert login.status_code == 200 and BANNER not in login.content.decode()
    page = client.get(reverse("pages:session", args=[session.pk])).content.decode()
    assert BANNER in page and "waiting for a worker: none is running" in page
    fragment = client.get(reverse("pages:session-progress", args=[session.pk])).content.decode()
    assert BANNER not in fragment and "waiting for a worker: none is running" in fragment

    now = timezone.now()
    WorkerHeartbeat.objects.create(name="w@h", host="h", pid=1, started_at=now, seen_at=now)
    page = client.get(reverse("pages:session", args=[session.pk])).content.decode()
    assert BANNER not in page and "queued, waiting for a worker…" in page and "none is running" not in page
    assert BANNER not in client.get(reverse("home")).content.decode()
