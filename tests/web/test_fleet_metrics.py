"""The fleet figures on /metrics: stranded CPUs per shape and pool equal to a count made here from the CPUs the
test itself allocated, pending shapes and outcomes, bounded pools, and summaries cached per node generation; and the
shipped monitoring: a real Prometheus (Debian's) scrapes a running `manage.py serve` and answers a PromQL query for
the stranded CPUs with the same count; the example alerting rules pass `promtool check rules` and their unit tests;
the example configuration is valid; the Grafana dashboard queries only metrics /metrics exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.api_latency import embedded_server
from numaweb.inventory import services
from numaweb.inventory.models import Cluster, NodeReport
from numaweb.scheduling import fleet
from scheduler_core.errors import RequestError
from scheduler_core.model.topology import synthetic
from tests.servers import free_port

from .helpers import make_job, make_node

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "numaweb-fleet.json"

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


def test_node_agents_silent_or_disagreeing_are_counted(fragmented, anon_client, settings):
    now = timezone.now()
    settings.NUMAWEB_AGENT_STALE_SECONDS = 300
    for name, heard, disagreements in (("a", now, 3), ("b", now - timedelta(seconds=301), 1)):
        NodeReport.objects.create(node=fragmented.nodes.get(name=name), digest=name, reported_at=heard,
                                  received_at=heard, changed_at=heard, disagreements=disagreements)
    samples = scrape(anon_client)
    assert value(samples, "numaweb_fleet_agent_nodes", cluster="frag", state="fresh") == 1
    assert value(samples, "numaweb_fleet_agent_nodes", cluster="frag", state="stale") == 1
    assert value(samples, "numaweb_fleet_agent_disagreements", cluster="frag") == 4


def test_configured_shapes_are_checked():
    assert [fleet.shape_label(s) for s in fleet.parse_shapes("4; 8,32Gi,nvidia.com/gpu=1")] == [
        "cpu=4", "cpu=8,memory=32Gi,nvidia.com/gpu=1"]
    with pytest.raises(ValueError, match="whole CPUs"):
        fleet.parse_shapes("2500m")
    with pytest.raises(RequestError, match="cpu"):
        fleet.parse_shapes("lots")



def promtool(*args: str, cwd: Path = PROMETHEUS) -> str:
    binary = shutil.which("promtool")
    assert binary, "promtool is required (apt-get install -y prometheus, or ./dev test)"
    done = subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_alerting_rules_pass_promtools_checks_and_unit_tests():
    assert "SUCCESS: 8 rules found" in promtool("check", "rules", "numaweb-alerts.yml")
    assert "SUCCESS" in promtool("test", "rules", "numaweb-alerts.test.yml")


def test_the_example_configuration_is_valid(tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    config = (PROMETHEUS / "prometheus.yml").read_text().replace("/etc/prometheus/numaweb-metrics-token", str(token))
    (tmp_path / "prometheus.yml").write_text(config)
    shutil.copy(PROMETHEUS / "numaweb-alerts.yml", tmp_path)
    assert "SUCCESS" in promtool("check", "config", "prometheus.yml", cwd=tmp_path)


def test_the_dashboard_queries_only_exported_metrics(fragmented, anon_client):
    response = anon_client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    exported = {family.name for family in text_string_to_metric_families(response.content.decode())}
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = {name for q in queries for name in re.findall(r"\bnumaweb_[a-z_]+", q)}
    assert len(used) >= 8 and used <= exported, used - exported


def query(port: int, promql: str) -> list:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_a_real_prometheus_scrapes_serve_and_counts_the_stranded_cpus(tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is required (apt-get install -y prometheus, or ./dev test)"
    with embedded_server(tmp_path / "data", settings={"NUMAWEB_METRICS_TOKEN": TOKEN,
                                                      "NUMAWEB_FLEET_SHAPES": "4"}) as (api, _facts):
        status, cluster = api.call("POST", "/api/clusters/", {"name": "frag"})
        assert status == 201, cluster
        for name, held in HELD.items():
            status, node = api.call("POST", "/api/nodes/", {
                "cluster": cluster["id"], "name": name, "topology": synthetic(1, 2, 4, 2).to_dict(),
                "cpu_manager_policy": "static", "topology_manager_policy": "single-numa-node"})
            assert status == 201, node
            status, body = api.call("POST", "/api/allocations/", {"node": node["id"], "pod": f"default/{name}",
                                                                  "container": "c", "cpus": held})
            assert status == 201, body
        expected = sum(f for held in HELD.values() for f in free_per_numa(held) if f < 4)
        assert expected == 3 + 3 + 2

        (tmp_path / "token").write_text(TOKEN)
        port, target = free_port(), api.base.removeprefix("http://")
        (tmp_path / "prometheus.yml").write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "numaweb", "metrics_path": "/metrics",
                                "authorization": {"type": "Bearer", "credentials_file": str(tmp_path / "token")},
                                "static_configs": [{"targets": [target]}]}]}))
        with open(tmp_path / "prometheus.log", "wb") as log:
            server = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                       f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
        try:
            deadline, result = time.monotonic() + 90, []
            while not result and time.monotonic() < deadline:
                time.sleep(0.5)
                try:
                    result = query(port, 'sum(numaweb_fleet_stranded_cpus{cluster="frag",shape="cpu=4"})')
                except OSError:
                    continue  # not listening yet
            assert result, (tmp_path / "prometheus.log").read_text(errors="replace")[-3000:]
            assert float(result[0]["value"][1]) == expected
            up = query(port, 'up{job="numaweb"}')
            assert [r["value"][1] for r in up] == ["1"]
        finally:
            server.terminate()
            server.wait(timeout=30)

