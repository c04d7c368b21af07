"""Comparisons and headroom through the API: 202 + URL, variants run (eagerly here; tests/worker runs
them on real workers), metrics, snapshot changes reported, export, 400s naming the field, and
headroom checked against a real dry-run session of headroom + 5 pods."""

from __future__ import annotations

import csv
import io
import json
import socket

import pytest
from django.utils import timezone

from numaweb.comparisons import services
from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.inventory import services as inventory
from numaweb.inventory.demo import build_demo
from numaweb.inventory.models import Allocation, Node
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker import runs
from tests.web.helpers import make_job, make_node, use_broker

THREE = [{"profile": "volcano"}, {"profile": "aligned"}, {"profile": "unaware"}]
SHAPE = {"cpu": "4", "memory": "8Gi", "policy": "single-numa-node"}



@pytest.fixture
def demo(db):
    return build_demo("demo")


def ask(api, cluster, django_capture_on_commit_callbacks, variants=THREE, **extra):
    with django_capture_on_commit_callbacks(execute=True):
        return api.post("/api/comparisons/", {"cluster": cluster.pk, "variants": variants, **extra}, format="json")


def test_three_profiles_on_the_demo_cluster(api, demo, eager, django_capture_on_commit_callbacks):
    r = ask(api, demo, django_capture_on_commit_callbacks, shape=SHAPE)
    assert r.status_code == 202, r.content
    body = api.get(r.headers["Location"]).json()
    assert body["status"] == "done" and body["cluster_changed"] is False and body["changed_nodes"] == []
    assert body["jobs"] == sorted(Job.objects.filter(status="pending").values_list("pk", flat=True))
    assert [v["profile"] for v in body["variants"]] == ["volcano", "aligned", "unaware"]
    assert all(v["status"] == "done" and v["error"] == "" for v in body["variants"]), body
    metrics = {v["profile"]: v["metrics"] for v in body["variants"]}
    assert metrics["aligned"]["topology_affinity_errors"] == 0
    for m in metrics.values():
        assert m["pods"] == 11 and m["pods_placed"] + m["pods_unplaced"] == 11
        assert sum(m["block_histogram"].values()) == sum(n.num_numa_nodes for n in Node.objects.filter(cluster=demo))
        assert m["headroom"] >= 0 and m["engine_s"] > 0
    # the numbers are the engine's: the same variant run directly gives the same metrics
    from scheduler_core.scheduler.compare import Shape, Variant, run_variant

    nodes, _seen = inventory.cluster_nodes(demo)
    _rows, jobs = job_services.engine_jobs(Job.objects.filter(pk__in=body["jobs"]))
    direct = run_variant(nodes, jobs, Variant("unaware"), Shape.parse(**SHAPE))["metrics"]
    assert {k: v for k, v in direct.items() if k != "engine_s"} == \
        {k: v for k, v in metrics["unaware"].items() if k != "engine_s"}
    # dry runs: nothing allocated, no job changed status
    assert not Allocation.objects.filter(origin=Allocation.SCHEDULED).exists()
    assert Job.objects.exclude(status="pending").count() == 0


def test_exports(api, demo, eager, django_capture_on_commit_callbacks):
    pk = ask(api, demo, django_capture_on_commit_callbacks, shape=SHAPE).json()["id"]
    r = api.get(f"/api/comparisons/{pk}/export/?format=csv")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    assert f'filename="comparison-{pk}.csv"' in r["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(r.content.decode())))
    assert [row["profile"] for row in rows] == ["volcano", "aligned", "unaware"]
    variants = {v.profile: v for v in ComparisonVariant.objects.filter(comparison_id=pk)}
    for row in rows:
        m = variants[row["profile"]].metrics
        assert int(row["topology_affinity_errors"]) == m["topology_affinity_errors"]
        assert int(row["headroom"]) == m["headroom"] and int(row["blocks_16-31"]) == m["block_histogram"]["16-31"]
    r = api.get(f"/api/comparisons/{pk}/export/?format=json")
    assert r.status_code == 200 and f'filename="comparison-{pk}.json"' in r["Content-Disposition"]
    data = json.loads(r.content)
    assert len(data["variants"]) == 3 and len(data["variants"][0]["nodes"]) == Node.objects.filter(cluster=demo).count()
    assert {"node", "numa", "largest_block", "headroom"} <= set(data["variants"][0]["nodes"][0])
    assert api.get(f"/api/comparisons/{pk}/export/?format=xml").status_code == 404


def test_overrides_apply_to_the_engine_nodes_only(api, cluster, eager, django_capture_on_commit_callbacks):
    """A GPU pod whose CPUs and GPU cannot share a NUMA node: the kubelet rejects it under
    single-numa-node (volcano places it, aligned does not), and admits it across NUMA nodes when the
    variant turns every node best-effort. The node rows keep their policy and generation."""
    node = make_node(cluster, "g", (1, 2, 4, 1), "single-numa-node")
    from scheduler_core.model.topology import synthetic

    inventory.set_topology(node, synthetic(1, 2, 4, 1, memory_per_numa=16 * 2**30,
                                           devices_per_numa={"nvidia.com/gpu": 1}), "synthetic")
    node.save()
    inventory.add_allocation(node, pod="default/a", container="c", cpus="4-7", devices={"nvidia.com/gpu": ["gpu0"]})
    node.refresh_from_db()
    generation = node.generation
    gpu = {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}
    job_services.save_job(job_services.engine_job_from_data({"name": "gpu", "tasks": [{
        "name": "t", "replicas": 1, "topology_policy": "single-numa-node",
        "template": {"containers": [{"name": "c", "requests": gpu, "limits": gpu}]}}]}), node.cluster)
    variants = [{"profile": "volcano"}, {"profile": "aligned"},
                {"profile": "aligned", "topology_manager_policy": "best-effort", "topology_manager_scope": "pod"}]
    body = ask(api, cluster, django_capture_on_commit_callbacks, variants=variants).json()
    body = api.get(body["url"]).json()
    assert body["status"] == "done", body
    got = [(v["label"], v["metrics"]["topology_affinity_errors"], v["metrics"]["pods_admitted"])
           for v in body["variants"]]
    assert got == [("volcano", 1, 0), ("aligned", 0, 0), ("aligned · best-effort/pod", 0, 1)]
    assert body["variants"][2]["metrics"]["pods_multi_numa"] == 1
    node.refresh_from_db()
    assert (node.topology_manager_policy, node.topology_manager_scope, node.generation) == \
        ("single-numa-node", "container", generation)


def test_a_cluster_that_changed_meanwhile_is_reported(api, cluster, django_capture_on_commit_callbacks):
    make_node(cluster, "n1", (2, 1, 4, 1), "single-numa-node")
    n2 = make_node(cluster, "n2", (2, 1, 4, 1), "best-effort")
    make_job("j", cpus="2", policy="single-numa-node")
    body = ask(api, cluster, django_capture_on_commit_callbacks).json()  # queued, no worker yet
    assert body["status"] == "pending" and body["snapshot_nodes"] == 2
    inventory.add_allocation(n2, pod="default/intruder", container="c", cpus="0-1")  # generation moves
    for variant in ComparisonVariant.objects.filter(comparison_id=body["id"]):
        services.execute_variant(variant.pk)
    body = api.get(body["url"]).json()
    assert body["status"] == "done" and body["cluster_changed"] is True and body["changed_nodes"] == ["n2"]
    assert all(v["changed_nodes"] == ["n2"] for v in body["variants"])


@pytest.mark.parametrize("payload, field, text", [
    ({"variants": []}, "variants", "1 to 8"),
    ({"variants": [{"profile": "fast"}]}, "variants", "variant 1: profile: unknown scheduler profile 'fast'"),
    ({"variants": [{"profile": "aligned"}, {"profile": "aligned", "topology_manager_scope": "rack"}]}, "variants",
     "variant 2: topology_manager_scope"),
    ({"variants": [{"profile": "volcano", "distance_tie_break": True}]}, "variants", "distance_tie_break"),
    ({"variants": [{"profile": "aligned"}] * 9}, "variants", "at most 8"),
    ({"variants": "aligned"}, "variants", "a list"),
    ({"variants": THREE, "shape": {"cpu": "lots"}}, "shape", "cpu"),
    ({"variants": THREE, "shape": {"cpu": "1", "gpus": 1}}, "shape", "gpus"),
    ({"variants": THREE, "shape": {"cpu": "1", "devices": "gpu"}}, "shape", "devices"),
    ({"variants": THREE, "cluster": 999999}, "cluster", "Invalid pk"),
])
def test_bad_requests_name_the_field(api, cluster, payload, field, text):
    make_node(cluster, "n1")
    r = api.post("/api/comparisons/", {"cluster": cluster.pk, **payload}, format="json")
    assert r.status_code == 400, r.content
    assert text in " ".join(r.json()[field])
    assert not Comparison.objects.exists()


def test_an_override_a_node_cannot_take_is_refused_naming_it(api, cluster):
    make_node(cluster, "n1", cpu_manager_options={"align-by-socket": "true"})
    r = api.post("/api/comparisons/", {"cluster": cluster.pk, "variants": [
        {"profile": "aligned", "topology_manager_policy": "single-numa-node"}]}, format="json")
    assert r.status_code == 400
    assert ("variant 1: node n1: Topolgy manager single-numa-node policy is incompatible with CPUManager "
            "align-by-socket") in r.json()["variants"][0]


def test_a_viewer_can_read_but_not_ask(anon, viewer_api, api, cluster, django_capture_on_commit_callbacks):
    make_node(cluster, "n1")
    r = viewer_api.post("/api/comparisons/", {"cluster": cluster.pk, "variants": THREE}, format="json")
    assert r.status_code == 403
    assert anon.post("/api/comparisons/", {"cluster": cluster.pk, "variants": THREE}, format="json").status_code == 401
    pk = ask(api, cluster, django_capture_on_commit_callbacks).json()["id"]
    assert viewer_api.get(f"/api/comparisons/{pk}/").status_code == 200
    assert viewer_api.get("/api/comparisons/").json()["count"] == 1
    assert anon.get(f"/api/comparisons/{pk}/").status_code == 401


def test_the_list_counts_each_comparisons_jobs_its_url_lists_them(api, demo, eager,
                                                                  django_capture_on_commit_callbacks):
    """The list's items are the comparison's own body with `jobs_count` for `jobs` (a whole cluster's job ids each
    made a page of 20 comparisons 446 KB at 22,000 jobs); the per-node tables are in neither, only the export."""
    url = ask(api, demo, django_capture_on_commit_callbacks, shape=SHAPE).headers["Location"]
    body = api.get(url).json()
    listed = api.get("/api/comparisons/").json()["results"]
    assert len(listed) == 1 and listed[0]["jobs_count"] == len(body["jobs"]) > 0
    assert {k: v for k, v in listed[0].items() if k != "jobs_count"} == {k: v for k, v in body.items() if k != "jobs"}
    assert all("nodes" not in v for v in body["variants"])
    export = api.get(body["export_json"]).json()
    assert [len(v["nodes"]) for v in export["variants"]] == [Node.objects.filter(cluster=demo).count()] * 3


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_broker_down_is_503_with_the_comparison_marked_failed(transactional_db, api, cluster):
    make_node(cluster, "n1")
    with use_broker(f"redis://127.0.0.1:{_closed_port()}/0"):
        r = api.post("/api/comparisons/", {"cluster": cluster.pk, "variants": THREE}, format="json")
    assert r.status_code == 503 and "unavailable" in r.json()["detail"]
    comparison = Comparison.objects.get()
    assert r.json()["comparison"].endswith(f"/api/comparisons/{comparison.pk}/")
    assert comparison.status == "failed" and comparison.finished_at is not None
    assert all("unavailable" in v.error for v in comparison.variants.all())


# -- headroom -------------------------------------------------------------------------------------------
def test_headroom_is_what_a_dry_run_session_of_five_more_pods_places(api, demo):
    """Acceptance: a dry-run session of headroom + 5 pods of the shape places exactly headroom, per node."""
    for query, shape in [
        ("cpu=4&memory=8Gi&devices=nvidia.com/gpu=1&policy=single-numa-node&profile=aligned",
         {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}),
        ("cpu=6&memory=4Gi&policy=best-effort&profile=volcano", {"cpu": "6", "memory": "4Gi"}),
        ("cpu=3&memory=1Gi&profile=unaware", {"cpu": "3", "memory": "1Gi"}),
    ]:
        r = api.get(f"/api/clusters/{demo.pk}/headroom/?{query}")
        assert r.status_code == 200, r.content
        room = r.json()
        assert room["total"] > 0 and room["total"] == sum(n["count"] for n in room["nodes"])
        assert [n["node"] for n in room["nodes"]] == sorted(Node.objects.filter(cluster=demo).values_list("name",
                                                                                                         flat=True))
        params = dict(p.split("=", 1) for p in query.split("&"))
        job = job_services.save_job(job_services.engine_job_from_data({
            "name": f"check-{params['cpu']}", "min_available": 1, "tasks": [{
                "name": "t", "replicas": room["total"] + 5, "topology_policy": params.get("policy"),
                "template": {"containers": [{"name": "c", "requests": shape, "limits": shape}]}}]}), demo)
        session = scheduling.start_session(demo, params["profile"], dry_run=True, jobs=[job])
        session = scheduling.execute_session(session.pk)
        assert session.status == SchedulingSession.DONE, session.error
        assert session.pods_placed == room["total"]
        per_node: dict[str, int] = {}
        for name in session.placements.exclude(node_name="").values_list("node_name", flat=True):
            per_node[name] = per_node.get(name, 0) + 1
        assert per_node == {n["node"]: n["count"] for n in room["nodes"] if n["count"]}


def test_headroom_shrinks_as_the_cluster_fills(api, cluster):
    node = make_node(cluster, "n1", (2, 1, 4, 1), "single-numa-node")
    url = f"/api/clusters/{cluster.pk}/headroom/?cpu=2&memory=1Gi&policy=single-numa-node"
    assert api.get(url).json()["total"] == 4
    inventory.add_allocation(node, pod="default/x", container="c", cpus="0")
    assert api.get(url).json()["nodes"] == [{"node": "n1", "count": 3, "rejected": 0, "at_least": False}]


def test_headroom_is_computed_once_per_cluster_state(api, cluster, monkeypatch, settings):
    """The same question on an unchanged cluster is the answer given before, even while every headroom slot is
    taken (a computation would be 429); an allocation written, the question is computed again."""
    from numaweb.comparisons.gate import headroom_slot

    settings.NUMAWEB_HEADROOM_CONCURRENCY = 1
    node = make_node(cluster, "n1", (2, 1, 4, 1), "single-numa-node")
    computed, engine = [], services.headroom
    monkeypatch.setattr(services, "headroom", lambda *args, **kw: computed.append(args[1]) or engine(*args, **kw))
    url = f"/api/clusters/{cluster.pk}/headroom/?cpu=2&memory=1Gi&policy=single-numa-node"
    first = api.get(url).json()
    with headroom_slot():
        assert api.get(url).json() == first and len(computed) == 1
        assert api.get(url.replace("cpu=2", "cpu=3")).status_code == 429  # another shape is computed: busy
    inventory.add_allocation(node, pod="default/x", container="c", cpus="0")
    assert api.get(url).json()["total"] == first["total"] - 1 and len(computed) == 2


def test_headroom_is_bounded_in_pods_and_says_at_least(api, cluster, settings):
    """NUMAWEB_HEADROOM_MAX_PODS caps the pods the dry-run sessions try (one session stands for the three
    identical nodes: 5 tried there count 5 on each); the answer then says "at least"."""
    for i in range(3):
        make_node(cluster, f"n{i}", (2, 1, 4, 1), "single-numa-node")
    url = f"/api/clusters/{cluster.pk}/headroom/?cpu=1"
    full = api.get(url).json()
    assert full["total"] == 24 and full["at_least"] is False and full["stopped"] is None
    settings.NUMAWEB_HEADROOM_MAX_PODS = 5
    capped = api.get(url).json()
    assert capped["total"] == 15 and capped["at_least"] is True and capped["sessions"] == 1
    assert capped["stopped"] == "limit of 5 pods tried"
    settings.NUMAWEB_HEADROOM_MAX_PODS, settings.NUMAWEB_HEADROOM_SECONDS = 10000, 0
    late = api.get(url).json()
    assert late["at_least"] is True and late["stopped"] == "time budget of 0 s" and late["sessions"] == 0


@pytest.mark.parametrize("cpu", ["1m", "999m", "0.5"])
def test_headroom_of_less_than_one_whole_cpu_is_refused(api, cluster, cpu, django_capture_on_commit_callbacks):
    """A sub-CPU shape is a slice of the shared pool, not a placement: refused (it once meant 599,000 pods)."""
    make_node(cluster, "n1")
    r = api.get(f"/api/clusters/{cluster.pk}/headroom/?cpu={cpu}")
    assert r.status_code == 400 and "one whole CPU" in r.json()["cpu"][0]
    r = ask(api, cluster, django_capture_on_commit_callbacks, shape={"cpu": cpu})
    assert r.status_code == 400 and "one whole CPU" in json.dumps(r.json()["shape"])


@pytest.mark.parametrize("query, field", [
    ("", "cpu"), ("cpu=lots", "cpu"), ("cpu=0", "cpu"), ("cpu=1&memory=8Gb", "memory"),
    ("cpu=1&devices=gpu", "devices"), ("cpu=1&devices=memory=1", "devices"), ("cpu=1&policy=tight", "policy"),
    ("cpu=1&profile=fast", "profile"), ("cpu=1&gpus=1", "gpus"),
])
def test_headroom_bad_queries_are_400_naming_the_parameter(api, cluster, query, field):
    make_node(cluster, "n1")
    r = api.get(f"/api/clusters/{cluster.pk}/headroom/?{query}")
    assert r.status_code == 400, r.content
    assert field in r.json()


def test_headroom_of_a_missing_cluster_is_404(api, db):
    assert api.get("/api/clusters/987654/headroom/?cpu=1").status_code == 404


def test_lost_messages_and_dead_workers_only_delay_a_variant(api, cluster, monkeypatch,
                                                              django_capture_on_commit_callbacks):
    """The workers' housekeeping sends again what is still pending (a message the broker lost) and what
    runs on a worker process that died; what was sent recently is left alone."""
    import socket

    make_node(cluster, "n1")
    sent: list[list[int]] = []
    monkeypatch.setattr(runs, "send", lambda task, ids: sent.append(list(ids)))
    with django_capture_on_commit_callbacks(execute=True):
        comparison = services.start_comparison(cluster, services.parse_variants(cluster, THREE))
    ids = sorted(comparison.variants.values_list("pk", flat=True))
    assert sent == [ids]
    assert services.VARIANTS.recover(60) == []  # just sent
    first, *_rest = ids
    ComparisonVariant.objects.filter(pk=first).update(status="running", worker=f"{socket.gethostname()}:999999999")
    assert sorted(services.VARIANTS.recover(0)) == ids
    row = ComparisonVariant.objects.get(pk=first)  # failed with the reason, and queued again
    assert row.status == "pending" and row.error == (f"worker lost: {socket.gethostname()}:999999999 died during the "
                                                     "run (killed or crashed); nothing was written; queued again "
                                                     "automatically")
    ComparisonVariant.objects.filter(pk=first).update(status="done")
    assert services.VARIANTS.recover(60) == []


def test_a_variant_past_a_time_limit_fails_naming_it(api, cluster, eager, settings, monkeypatch,
                                                     django_capture_on_commit_callbacks):
    """Soft limit: checked between pods, the variant fails saying so. Hard limit: a variant whose worker process
    was ended after running that long is failed naming the limit, not sent again."""
    import socket
    from datetime import timedelta

    make_node(cluster, "n1")
    make_job("j1", cpus="1")
    settings.NUMAWEB_TASK_SOFT_TIME_LIMIT = 0
    comparison = Comparison.objects.get(pk=ask(api, cluster, django_capture_on_commit_callbacks).json()["id"])
    errors = set(comparison.variants.values_list("error", flat=True))
    assert errors == {"stopped at the soft time limit of 0 s (NUMAWEB_TASK_SOFT_TIME_LIMIT); nothing was written"}
    assert comparison.variants.filter(status="failed").count() == 3

    settings.NUMAWEB_TASK_TIME_LIMIT = 60
    sent: list[list[int]] = []
    monkeypatch.setattr(runs, "send", lambda task, ids: sent.append(list(ids)))
    dead = f"{socket.gethostname()}:999999999"
    late, early, _ = comparison.variants.order_by("index")
    now = timezone.now()
    ComparisonVariant.objects.filter(pk=late.pk).update(status="running", worker=dead,
                                                        started_at=now - timedelta(seconds=61))
    ComparisonVariant.objects.filter(pk=early.pk).update(status="running", worker=dead,
                                                         started_at=now - timedelta(seconds=5))
    assert services.VARIANTS.recover(60) == [early.pk] and sent == [[early.pk]]
    late.refresh_from_db()
    assert late.status == "failed"
    assert late.error == (f"stopped at the hard time limit of 60 s (NUMAWEB_TASK_TIME_LIMIT): {dead} was ended; "
                          "nothing was written")


def test_headroom_on_the_demo_stays_within_its_budget(api, demo, settings):
    """Acceptance (issue 21): any shape is answered or refused within the budget, memory growth < 200 MB; `cpu=1m`
    once meant 599,000 simulated pods, 84 s and +1.1 GB on this cluster."""
    from tests.measure import MiB, measure

    tiny = measure(lambda: api.get(f"/api/clusters/{demo.pk}/headroom/?cpu=1m"))
    assert tiny.result.status_code == 400 and tiny.seconds < 1
    settings.NUMAWEB_HEADROOM_MAX_PODS = 200  # the bound, not the cluster, decides the work
    one = measure(lambda: api.get(f"/api/clusters/{demo.pk}/headroom/?cpu=1&memory=1Gi"))
    body = one.result.json()
    assert one.result.status_code == 200 and body["at_least"] and body["sessions"] >= 1
    assert one.seconds < settings.NUMAWEB_HEADROOM_SECONDS and one.growth < 200 * MiB, (one.seconds, one.growth)


def test_every_engine_profile_is_compared_and_exported_with_its_kubelet_refusals(
        api, demo, eager, django_capture_on_commit_callbacks):
    """A comparison of every profile in the engine's registry (nrt also with another scoring strategy) runs
    through the API; the CSV and JSON exports carry each variant's settings and its kubelet refusals by reason,
    equal to what the engine computes for that variant directly."""
    from scheduler_core.scheduler.compare import Shape, Variant, run_variant
    from scheduler_core.scheduler.profiles import PROFILES

    variants = [{"profile": p} for p in PROFILES] + [{"profile": "nrt", "strategy": "MostAllocated"}]
    r = ask(api, demo, django_capture_on_commit_callbacks, variants=variants, shape=SHAPE)
    assert r.status_code == 202, r.content
    body = api.get(r.headers["Location"]).json()
    assert [v["profile"] for v in body["variants"]] == [*PROFILES, "nrt"]
    assert all(v["status"] == "done" and v["error"] == "" for v in body["variants"]), body
    assert body["variants"][-1]["label"] == "nrt · MostAllocated"

    nodes, _seen = inventory.cluster_nodes(demo)
    _rows, jobs = job_services.engine_jobs(Job.objects.filter(pk__in=body["jobs"]))
    stored = {v.index: v for v in ComparisonVariant.objects.filter(comparison_id=body["id"])}
    for i, spec in enumerate(variants):
        direct = run_variant(nodes, jobs, Variant.from_dict(spec), Shape.parse(**SHAPE))["metrics"]
        assert {k: v for k, v in direct.items() if k != "engine_s"} == \
            {k: v for k, v in stored[i].metrics.items() if k != "engine_s"}, spec

    rows = list(csv.DictReader(io.StringIO(api.get(f"/api/comparisons/{body['id']}/export/?format=csv")
                                           .content.decode())))
    assert [row["profile"] for row in rows] == [*PROFILES, "nrt"]
    assert [row["strategy"] for row in rows] == [""] * len(PROFILES) + ["MostAllocated"]
    for i, row in enumerate(rows):
        m = stored[i].metrics
        assert int(row["pods_rejected"]) == m["pods_rejected"]
        assert int(row["topology_affinity_errors"]) == m["topology_affinity_errors"]
        for reason, n in m["admission_errors_by_reason"].items():
            column = "topology_affinity_errors" if reason == "TopologyAffinityError" else f"rejected_{reason}"
            assert int(row[column]) == n
    data = json.loads(api.get(f"/api/comparisons/{body['id']}/export/?format=json").content)
    assert [v["profile"] for v in data["variants"]] == [*PROFILES, "nrt"]
    assert [v["strategy"] for v in data["variants"]] == [None] * len(PROFILES) + ["MostAllocated"]
    assert [v["metrics"]["pods_rejected"] for v in data["variants"]] == \
        [stored[i].metrics["pods_rejected"] for i in range(len(variants))]


@pytest.mark.parametrize(("variant", "text"), [
    ({"profile": "aligned", "strategy": "MostAllocated"},
     "strategy: only the nrt and koordinator profiles have a scoring strategy"),
    ({"profile": "nrt", "strategy": "Fastest"}, "strategy: unknown scoring strategy 'Fastest'"),
])
def test_a_bad_strategy_is_refused_naming_it(api, cluster, variant, text):
    r = api.post("/api/comparisons/", {"cluster": cluster.pk, "variants": [variant]}, format="json")
    assert r.status_code == 400 and text in r.json()["variants"][0]
