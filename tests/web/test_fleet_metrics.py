"""The fleet figures on /metrics: stranded CPUs per shape and pool equal to a count made here from the CPUs the
test itself allocated, pending shapes and outcomes, bounded pools, and summaries cached per node generation."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from numaweb import fleet
from numaweb.inventory import services
from numaweb.inventory.models import Cluster
from scheduler_core.errors import RequestError

from .helpers import make_job, make_node

TOKEN = "fleet-scrape-token"
# 2 NUMA nodes x 4 cores x 2 threads, numbered as Linux does (a core's second thread is its first + 8):
NUMA_CPUS = (set(range(0, 4)) | set(range(8, 12)), set(range(4, 8)) | set(range(12, 16)))
# held CPUs per node: free per NUMA node a: 3, 3; b: 8, 2; c: 0, 5
HELD = {"a": "0-2,8-9,4-6,12-13", "b": "4-6,12-14", "c": "0-3,8-11,4-5,12"}
POOLS = {"a": "gpu", "b": "gpu", "c": ""}


def free_per_numa(held: str) -> list[int]:
    """Free CPUs of NUMA 0 and 1 after `held` (ranges of the two NUMA nodes), counted by hand."""
    taken = set()
    for part in held.split(","):
        lo, _, hi = part.partition("-")
        taken.update(range(int(lo), int(hi or lo) + 1))
    return [len(cpus - taken) for cpus in NUMA_CPUS]


@pytest.fixture
def fragmented(db, settings):
    settings.NUMAWEB_METRICS_TOKEN = TOKEN
    settings.NUMAWEB_FLEET_SHAPES = "4;6"
    fleet._CACHE.clear()
    cluster = Cluster.objects.create(name="frag")
    for name, held in HELD.items():
        node = make_node(cluster, name, shape=(1, 2, 4, 2), policy="single-numa-node")
        if POOLS[name]:
            node.labels = {"node.kubernetes.io/pool": POOLS[name]}
            node.save()
        services.add_allocation(node, pod=f"default/{name}-pod", container="c", cpus=held)
    return cluster


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_stranded_cpus_per_shape_and_pool_match_a_count_by_hand(fragmented, anon_client):
    assert [free_per_numa(held) for held in HELD.values()] == [[3, 3], [8, 2], [0, 5]]
    samples = scrape(anon_client)
    for shape, cpus in (("cpu=4", 4), ("cpu=6", 6)):
        for pool in ("gpu", "none"):
            members = [n for n in HELD if (POOLS[n] or "none") == pool]
            frees = [f for n in members for f in free_per_numa(HELD[n])]
            expected = sum(f for f in frees if f < cpus)
            assert value(samples, "numaweb_fleet_stranded_cpus", cluster="frag", pool=pool, shape=shape) == expected
            assert value(samples, "numaweb_fleet_aligned_pods", cluster="frag", pool=pool,
                         shape=shape) == sum(f // cpus for f in frees)
    assert value(samples, "numaweb_fleet_cpus_free", cluster="frag", pool="gpu") == 3 + 3 + 8 + 2
    assert value(samples, "numaweb_fleet_nodes", cluster="frag", pool="none") == 1
    # NUMA nodes by free CPUs: a: 3, 3; b: 8, 2; c: 0, 5
    assert value(samples, "numaweb_fleet_numa_blocks", cluster="frag", pool="gpu", cpus="2-3") == 3
    assert value(samples, "numaweb_fleet_numa_blocks", cluster="frag", pool="gpu", cpus="8-15") == 1
    assert value(samples, "numaweb_fleet_numa_blocks", cluster="frag", pool="none", cpus="0") == 1


def test_pending_pods_bring_their_shapes_and_their_outcomes(fragmented, anon_client):
    make_job("wide", cpus="5", replicas=3, cluster=fragmented)
    make_job("small", cpus="500m", replicas=2, cluster=fragmented)  # pins nothing: no shape of its own
    samples = scrape(anon_client)
    assert value(samples, "numaweb_fleet_shape_pending_pods", cluster="frag", shape="cpu=5,memory=1Gi") == 3
    assert not any(k[0] == "numaweb_fleet_shape_pending_pods" and ("shape", "cpu=0") in k[1] for k in samples)
    # a 5-CPU pod fits on b's NUMA 0 (8 free) and c's NUMA 1 (5 free) only: 3 + 3 + 2 + 0 stranded
    assert value(samples, "numaweb_fleet_stranded_cpus", cluster="frag", pool="gpu", shape="cpu=5,memory=1Gi") == 8
    assert value(samples, "numaweb_fleet_pending_pods", cluster="frag", outcome="not_tried") == 5


def test_pools_past_the_limit_fold_into_other(fragmented, anon_client, settings):
    settings.NUMAWEB_FLEET_MAX_POOLS = 1
    samples = scrape(anon_client)
    pools = {dict(k[1])["pool"] for k in samples if k[0] == "numaweb_fleet_nodes"}
    assert pools == {"other"}
    assert value(samples, "numaweb_fleet_nodes", cluster="frag", pool="other") == 3


def test_summaries_are_built_once_per_node_generation(fragmented, anon_client, monkeypatch):
    scrape(anon_client)
    built = []
    real = services.engine_nodes

    def counting(rows, *extra):
        for item in real(rows, *extra):
            built.append(item[0][1])
            yield item

    monkeypatch.setattr(services, "engine_nodes", counting)
    scrape(anon_client)
    assert built == []  # nothing changed: no engine node built
    node = fragmented.nodes.get(name="b")
    services.add_allocation(node, pod="default/more", container="c", cpus="15")
    samples = scrape(anon_client)
    assert built == ["b"]
    assert value(samples, "numaweb_fleet_cpus_free", cluster="frag", pool="gpu") == 3 + 3 + 8 + 1


def test_configured_shapes_are_checked():
    assert [fleet.shape_label(s) for s in fleet.parse_shapes("4; 8,32Gi,nvidia.com/gpu=1")] == [
        "cpu=4", "cpu=8,memory=32Gi,nvidia.com/gpu=1"]
    with pytest.raises(ValueError, match="whole CPUs"):
        fleet.parse_shapes("2500m")
    with pytest.raises(RequestError, match="cpu"):
        fleet.parse_shapes("lots")
