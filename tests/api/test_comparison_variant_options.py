"""The koordinator and kai profiles' settings on a comparison's variants through the API: they are stored, run (the
metrics are the engine's for that variant), labelled and exported; a setting the profile lacks or a bad value is a
400 naming the field, and nothing is written."""

from __future__ import annotations

import csv
import io

import pytest

from numaweb.comparisons.models import Comparison, ComparisonVariant
from numaweb.inventory import services as inventory
from numaweb.inventory.demo import build_demo
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from scheduler_core.scheduler.compare import Variant, run_variant

GPU = "nvidia.com/gpu"
VARIANTS = [
    {"profile": "koordinator"},
    {"profile": "koordinator", "strategy": "MostAllocated", "numa_strategy": "MostAllocated",
     "cpu_bind_policy": "SpreadByPCPUs"},
    {"profile": "kai", "ignore_list": [GPU, "example.com/nic"]},
]
NEW = ("numa_strategy", "cpu_bind_policy", "ignore_list")


@pytest.fixture
def demo(db):
    return build_demo("demo")


def test_koordinator_and_kai_settings_are_run_stored_and_exported(api, demo, eager,
                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post("/api/comparisons/", {"cluster": demo.pk, "variants": VARIANTS}, format="json")
    assert r.status_code == 202, r.content
    body = api.get(r.headers["Location"]).json()
    assert all(v["status"] == "done" and v["error"] == "" for v in body["variants"]), body
    assert [v["label"] for v in body["variants"]] == [
        "koordinator", "koordinator · MostAllocated · NUMA MostAllocated · SpreadByPCPUs",
        "kai · ignoring example.com/nic,nvidia.com/gpu"]
    assert [[v[k] for k in ("strategy", *NEW)] for v in body["variants"]] == [
        [None, None, None, None], ["MostAllocated", "MostAllocated", "SpreadByPCPUs", None],
        [None, None, None, ["example.com/nic", GPU]]]

    # what the worker ran is the stored variant: the metrics are the engine's for it, and on the demo the
    # MostAllocated node scoring leaves fewer free single-NUMA blocks than the default
    nodes, _seen = inventory.cluster_nodes(demo)
    _rows, jobs = job_services.engine_jobs(Job.objects.filter(pk__in=body["jobs"]))
    stored = {v.index: v for v in ComparisonVariant.objects.filter(comparison_id=body["id"])}
    for i, spec in enumerate(VARIANTS):
        assert Variant.from_dict(stored[i].settings) == Variant.from_dict(spec)
        direct = run_variant(nodes, jobs, Variant.from_dict(spec))["metrics"]
        assert {k: v for k, v in direct.items() if k != "engine_s"} == \
            {k: v for k, v in stored[i].metrics.items() if k != "engine_s"}, spec
    assert stored[1].metrics["free_single_numa_blocks"] < stored[0].metrics["free_single_numa_blocks"]

    rows = list(csv.DictReader(io.StringIO(api.get(f"/api/comparisons/{body['id']}/export/?format=csv")
                                           .content.decode())))
    assert [[row[k] for k in ("strategy", *NEW)] for row in rows] == [
        ["", "", "", ""], ["MostAllocated", "MostAllocated", "SpreadByPCPUs", ""],
        ["", "", "", f"example.com/nic,{GPU}"]]
    data = api.get(f"/api/comparisons/{body['id']}/export/?format=json").json()
    assert [v["ignore_list"] for v in data["variants"]] == [None, None, ["example.com/nic", GPU]]
    assert [v["cpu_bind_policy"] for v in data["variants"]] == [None, "SpreadByPCPUs", None]


def test_a_variant_stored_before_these_settings_exports_them_empty(api, demo, eager,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post("/api/comparisons/", {"cluster": demo.pk, "variants": [{"profile": "nrt"}]}, format="json")
    row = ComparisonVariant.objects.get(comparison_id=r.json()["id"])
    row.settings = {k: v for k, v in row.settings.items() if k not in NEW}  # as comparisons stored earlier
    row.save(update_fields=["settings"])
    (variant,) = api.get(f"/api/comparisons/{row.comparison_id}/export/?format=json").json()["variants"]
    assert [variant[k] for k in NEW] == [None, None, None] and variant["profile"] == "nrt"
    (line,) = csv.DictReader(io.StringIO(api.get(f"/api/comparisons/{row.comparison_id}/export/?format=csv")
                                         .content.decode()))
    assert [line[k] for k in NEW] == ["", "", ""]
    assert Variant.from_dict(row.settings) == Variant("nrt")


@pytest.mark.parametrize("variant, text", [
    ({"profile": "kai", "strategy": "MostAllocated"},
     "variant 1: strategy: only the nrt and koordinator profiles have a scoring strategy"),
    ({"profile": "koordinator", "strategy": "BalancedAllocation"},
     "variant 1: strategy: unknown Koordinator scoring strategy 'BalancedAllocation'; expected one of: "
     "LeastAllocated, MostAllocated"),
    ({"profile": "nrt", "numa_strategy": "MostAllocated"},
     "variant 1: numa_strategy: only the koordinator profile has a NUMA scoring strategy"),
    ({"profile": "koordinator", "numa_strategy": "Most"},
     "variant 1: numa_strategy: unknown Koordinator NUMA scoring strategy 'Most'; expected one of: LeastAllocated, "
     "MostAllocated"),
    ({"profile": "aligned", "cpu_bind_policy": "SpreadByPCPUs"},
     "variant 1: cpu_bind_policy: only the koordinator profile has a default CPU bind policy"),
    ({"profile": "koordinator", "cpu_bind_policy": "Spread"},
     "variant 1: cpu_bind_policy: unknown Koordinator default CPU bind policy 'Spread'; expected one of: FullPCPUs, "
     "SpreadByPCPUs"),
    ({"profile": "koordinator", "ignore_list": [GPU]},
     "variant 1: ignore_list: only the kai profile has an ignore list"),
    ({"profile": "kai", "ignore_list": GPU}, "variant 1: ignore_list: a list of resource names (non-empty strings)"),
    ({"profile": "kai", "ignore_list": [""]}, "variant 1: ignore_list: a list of resource names (non-empty strings)"),
    ({"profile": "kai", "ignore_list": [1]}, "variant 1: ignore_list: a list of resource names (non-empty strings)"),
])
def test_a_setting_the_profile_lacks_or_a_bad_value_is_a_400_naming_it(api, cluster, variant, text):
    r = api.post("/api/comparisons/", {"cluster": cluster.pk, "variants": [variant]}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["variants"][0].startswith(text)
    assert not Comparison.objects.exists()
