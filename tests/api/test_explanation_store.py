"""The explanation store: normalized rows whose export equals the engine's own document; lists and
polls never load explanations; the worker does not read back what it wrote; bytes per pod stay small."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from numaweb.inventory.large_demo import build_large_demo
from numaweb.inventory.services import cluster_nodes
from numaweb.jobs import services as job_services
from numaweb.scheduling import results, services
from numaweb.scheduling.models import Detail, NodeNames, Placement, SchedulingSession, SessionJob, Verdict, VerdictGroup
from scheduler_core.session import Cluster as EngineCluster
from scheduler_core.session import run_session

RESULT_TABLES = ("scheduling_placement", "scheduling_verdict", "scheduling_verdictgroup", "scheduling_nodenames",
                 "scheduling_detail", "scheduling_sessionjob")


def _run(profile: str, dry_run: bool = True, nodes: int = 80, pods: int = 160) -> tuple[SchedulingSession, dict]:
    """A session on the large demo cluster through the service, and the engine's own document for the
    same inputs (computed first, on copies: the session then runs on the same state)."""
    cluster = build_large_demo("scale", nodes, pods, seed=7)
    session = SchedulingSession.objects.create(cluster=cluster, profile=profile, dry_run=dry_run)
    session.jobs.set(cluster_jobs())
    nodes, _seen = cluster_nodes(cluster)
    _rows, jobs = job_services.engine_jobs(session.jobs.all())
    expected = run_session(EngineCluster(nodes), jobs, profile=profile).to_dict()
    services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "done", session.error
    return session, expected


def cluster_jobs():
    from numaweb.jobs.models import Job

    return Job.objects.filter(namespace="scale")


def _reads_results(queries) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("SELECT")
            and any(f'"{t}"' in q["sql"] for t in RESULT_TABLES)]


@pytest.mark.parametrize("profile", ["volcano", "aligned"])
def test_export_equals_the_engines_document(api, profile):
    session, expected = _run(profile)
    r = api.get(f"/api/sessions/{session.pk}/explanation.json")
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    exported = json.loads(b"".join(r.streaming_content))
    expected.pop("timings"), exported.pop("timings")
    assert exported["counts"].pop("skipped") == 0  # the web's own count: pods already holding resources
    assert exported["schema"] == "numaweb.session/1"
    assert exported.keys() == expected.keys()
    for key in expected:
        assert exported[key] == expected[key], key
    assert Placement.objects.filter(session=session).count() == len(expected["pods"])
    assert SessionJob.objects.filter(session=session).count() == len(expected["jobs"])


def test_pages_of_results_load_only_the_refs_they_show(api):
    session, expected = _run("volcano")
    r = api.get(f"/api/sessions/{session.pk}/results/?page_size=10&page=2")
    assert r.status_code == 200
    got = [row["detail"] for row in r.json()["results"]]
    assert got == expected["pods"][10:20]
    groups_used = {ref for p in Placement.objects.filter(session=session)[10:20] for ref in p.groups}
    with CaptureQueriesContext(connection) as ctx:
        api.get(f"/api/sessions/{session.pk}/results/?page_size=10&page=2")
    group_queries = [q["sql"] for q in ctx.captured_queries if '"scheduling_verdictgroup"' in q["sql"]]
    assert len(group_queries) == 1
    assert VerdictGroup.objects.filter(session=session).count() > len(groups_used)  # not every group was read


def test_lists_and_polls_never_load_explanations(api, client):
    session, _expected = _run("aligned")
    for url in ("/api/sessions/", f"/api/sessions/{session.pk}/", "/api/sessions/?page_size=10"):
        with CaptureQueriesContext(connection) as ctx:
            r = api.get(url)
        assert r.status_code == 200
        assert _reads_results(ctx.captured_queries) == [], url
        assert len(r.content) <= 20_000, (url, len(r.content))
    poll = api.get(f"/api/sessions/{session.pk}/").json()
    assert poll["status"] == "done" and poll["progress_done"] == poll["progress_total"] == 160
    assert "summary" not in poll and poll["explanation_url"].endswith(f"/api/sessions/{session.pk}/explanation.json")
    with CaptureQueriesContext(connection) as ctx:
        r = client.get("/sessions/")
    assert r.status_code == 200 and _reads_results(ctx.captured_queries) == []


def test_worker_writes_results_without_reading_them_back(db):
    cluster = build_large_demo("scale", 40, 60, seed=3)
    session = SchedulingSession.objects.create(cluster=cluster, profile="volcano", dry_run=False)
    session.jobs.set(cluster_jobs())
    with CaptureQueriesContext(connection) as ctx:
        services.execute_session(session.pk)
    session.refresh_from_db()
    assert session.status == "done", session.error
    assert _reads_results(ctx.captured_queries) == []
    assert Placement.objects.filter(session=session).count() == 60


@pytest.mark.parametrize("profile", ["volcano", "aligned"])
def test_stored_bytes_per_pod(db, profile):
    """Every value written for the session (columns as text/JSON), per pod: ≤ 2 KiB on a moderate cluster
    (on a toy one, the verdicts of its many node classes are shared by too few pods to say much)."""
    session, expected = _run(profile, nodes=200, pods=1000)
    total = 0
    for model in (Placement, Verdict, VerdictGroup, NodeNames, Detail, SessionJob):
        fields = [f.attname for f in model._meta.concrete_fields]
        for row in model.objects.filter(session=session).values_list(*fields):
            total += sum(len(v if isinstance(v, str) else json.dumps(v)) for v in row)
    per_pod = total / len(expected["pods"])
    document = len(json.dumps(expected)) / len(expected["pods"])
    assert per_pod <= 2048, per_pod
    assert per_pod < document / 2, (per_pod, document)


def test_spans_for_metrics_come_from_columns(db):
    session, expected = _run("volcano")
    spans = list(results.placement_spans(session))
    assert [s.pod for s in spans] == [p["pod"] for p in expected["pods"]]
    for s, p in zip(spans, expected["pods"], strict=True):
        assert s.status == p["status"]
        assert s.admitted_numa == (None if p["admitted_numa"] is None else len(p["admitted_numa"]))
        assert s.predicted_numa == (None if p["predicted"] is None else len(p["predicted"]["numa"]))


def test_explanation_of_an_unfinished_session_is_a_conflict(api, cluster):
    session = SchedulingSession.objects.create(cluster=cluster)
    r = api.get(f"/api/sessions/{session.pk}/explanation.json")
    assert r.status_code == 409 and "pending" in r.json()["detail"]


@pytest.mark.parametrize("profile", ["volcano", "aligned"])
def test_every_group_is_stored_and_ranked_and_cut_when_read(db, profile):
    """A placement holds every verdict group in the engine's order; reading ranks them, counts the
    outcomes and keeps the session's `explain_groups`, as the engine's own document does."""
    from numaweb.scheduling import store

    cluster = build_large_demo("scale", 80, 160, seed=3)
    session = SchedulingSession.objects.create(cluster=cluster, profile=profile, dry_run=True, explain_groups=2,
                                               explain_names=2)
    nodes, seen = cluster_nodes(cluster)
    _rows, jobs = job_services.engine_jobs(cluster_jobs())
    result = run_session(EngineCluster(nodes), jobs, profile=profile, explain_groups=2, explain_names=2)
    expected = result.to_dict()["pods"]
    assert any(p["groups_omitted"]["groups"] for p in expected)  # the cut is exercised
    store.ResultWriter(session, result, {name: nid for name, (nid, _g) in seen.items()}).save()
    placements = list(Placement.objects.filter(session=session).order_by("index"))
    assert max(len(p.groups) for p in placements) > 2 and all(p.outcomes == [] for p in placements)
    assert results.pod_records(session, placements) == expected


def test_placements_written_ranked_with_their_counts_read_as_stored(db):
    """Rows from before every group was stored (0008) hold the groups shown and the counts: read as they are."""
    session, _expected = _run("volcano")
    p = Placement.objects.filter(session=session).order_by("index").first()
    ranked = results.pod_records(session, [p])[0]
    first = ranked["groups"][0]
    refs = list(VerdictGroup.objects.filter(session=session, verdict=first["verdict"], node_count=first["node_count"],
                                            score=first["score"]).values_list("ref", flat=True))
    Placement.objects.filter(pk=p.pk).update(outcomes=[5, 0, 70, 5], groups=refs[:1], groups_omitted=3,
                                             nodes_omitted=79)
    p.refresh_from_db()
    old = results.pod_records(session, [p])[0]
    assert old["outcomes"] == {"passed": 5, "skipped": 0, "filtered": 70, "unschedulable": 5}
    assert old["groups"] == ranked["groups"][:1] and old["groups_omitted"] == {"groups": 3, "nodes": 79}


def test_export_streams_under_asgi_the_products_server(api, token):
    """Under ASGI the export is an async stream pulled in batches (a plain iterator would be read whole into the
    server's memory first); it is the same document as under WSGI."""
    import warnings

    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    session, _expected = _run("volcano")
    url = f"/api/sessions/{session.pk}/explanation.json"
    wsgi = b"".join(api.get(url).streaming_content)
    client = AsyncClient()

    async def fetch() -> bytes:
        r = await client.get(url, headers={"Authorization": f"Token {token.key}"})
        assert r.status_code == 200 and r.streaming and r.is_async, r.content if not r.streaming else ""
        return b"".join([part async for part in r.streaming_content])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "StreamingHttpResponse must consume synchronous iterators" would fail
        asgi = async_to_sync(fetch)()
    assert json.loads(asgi) == json.loads(wsgi)
