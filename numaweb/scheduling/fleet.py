"""The fleet figures `/metrics` publishes, per cluster and node pool: free CPUs and devices, free single-NUMA
blocks by size, and for the pod shapes that matter the capacity stranded by fragmentation (free by count, but on
NUMA nodes where not one pod of the shape fits aligned: `scheduler_core.scheduler.stranded`), with the aligned
pods that still fit; the pending pods by the outcome of the cluster's last session; and what the node agents say
(nodes reported, stale, and where the model and the kubelet disagree).

Shapes: the `NUMAWEB_FLEET_MAX_SHAPES` commonest shapes of each cluster's pending pods (those that pin whole CPUs),
plus the shapes of `NUMAWEB_FLEET_SHAPES`. Pools: a node's pool label (`inventory.pools`), `none` without one;
past `NUMAWEB_FLEET_MAX_POOLS` pools per cluster the smallest are counted as `other`. So a cluster adds at most
pools × (shapes × (2 + device resources) + block sizes + resources + 2) series, whatever its size.

Each node's summary is built from its engine node once per node version (generation, updated_at), and equal
summaries are counted together, so a scrape of 5,000 unchanged nodes reads two columns per node and does arithmetic
on the distinct summaries only. The summaries are kept per process and, per cluster, in the shared cache (Redis or
the database), so a new web process reads them instead of building 5,000 engine nodes again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Q, Sum
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from numaweb.inventory import services as inventory
from numaweb.inventory.agent import stale_after
from numaweb.inventory.models import Cluster, Node, NodeReport
from numaweb.inventory.pools import pool_of
from numaweb.jobs.models import Job, Task
from numaweb.jobs.services import pod_from_stored
from numaweb.scheduling.models import Placement, PodStatus, SchedulingSession
from scheduler_core.errors import EngineError
from scheduler_core.model.node import Node as EngineNode
from scheduler_core.model.pods import pod_device_request, pod_guaranteed_cpus, pod_memory_request
from scheduler_core.model.quantity import format_bytes
from scheduler_core.scheduler.compare import BLOCK_BINS
from scheduler_core.scheduler.headroom import Shape
from scheduler_core.scheduler.stranded import NodeFree, node_free, stranded

NO_POOL, OTHER_POOL = "none", "other"
WAITING = (Job.PENDING, Job.UNSCHEDULABLE, Job.PARTLY)


@dataclass(frozen=True)
class _Entry:
    version: tuple[int, datetime]
    pool: str
    free: NodeFree | None  # None: the engine could not read the node


_CACHE: dict[int, _Entry] = {}


def summaries(cluster_id: int) -> list[tuple[str, NodeFree]]:
    """(pool, summary) of every readable node of the cluster, building engine nodes only for changed ones (a label
    change moves `updated_at`, so the pool is kept with the summary)."""
    rows = list(Node.objects.filter(cluster_id=cluster_id, removed_at__isnull=True)
                .values_list("pk", "generation", "updated_at"))
    if any(pk not in _CACHE for pk, _g, _u in rows):  # a new process, or new nodes: what another process built
        _load_shared(cluster_id)
    stale = [pk for pk, generation, updated in rows
             if (e := _CACHE.get(pk)) is None or e.version != (generation, updated)]
    alike: dict[tuple, tuple[object, object, NodeFree]] = {}
    for start in range(0, len(stale), 500):
        chunk = Node.objects.filter(pk__in=stale[start:start + 500]).annotate(pool=pool_of())
        for (pk, _name, generation, updated, pool), node in inventory.engine_nodes(chunk, "updated_at", "pool"):
            free = None if isinstance(node, Exception) else _summary(node, alike)
            _CACHE[pk] = _Entry((generation, updated), pool or NO_POOL, free)
    if stale:
        _save_shared(cluster_id, [pk for pk, _g, _u in rows])
    out = []
    for pk, _g, _u in rows:
        entry = _CACHE.get(pk)
        if entry is not None and entry.free is not None:
            out.append((entry.pool, entry.free))
    return out


def _summary(node: EngineNode, alike: dict[tuple, tuple[object, object, NodeFree]]) -> NodeFree:
    """`node_free`, once per distinct topology, settings and free state: the nodes of a pool share their topology
    and settings objects, and most of them hold the same (often nothing). The entry keeps both objects, so their
    ids stay theirs while `alike` lives."""
    topology, kubelet = node.topology, node.kubelet
    key = (id(topology), id(kubelet), node.free_cpus, frozenset(node.used_devices),
           tuple(node.memory_free(n) for n in topology.numa_ids) if kubelet.static_memory else ())
    hit = alike.get(key)
    if hit is None:
        hit = alike[key] = (topology, kubelet, node_free(node))
    return hit[2]


def _shared_key(cluster_id: int) -> str:
    return f"fleet-summaries:{cluster_id}"


def _save_shared(cluster_id: int, pks: list[int]) -> None:
    """The cluster's summaries for other processes: each distinct summary once, and per node its version, pool and
    which summary (thousands of nodes share a few hundred summaries; loading them is what a new process pays)."""
    distinct: dict[NodeFree | None, int] = {}
    nodes = {}
    for pk in pks:
        entry = _CACHE.get(pk)
        if entry is not None:
            nodes[pk] = (entry.version, entry.pool, distinct.setdefault(entry.free, len(distinct)))
    cache.set(_shared_key(cluster_id), (list(distinct), nodes), timeout=None)


def _load_shared(cluster_id: int) -> None:
    shared = cache.get(_shared_key(cluster_id))
    if not isinstance(shared, tuple):
        return
    distinct, nodes = shared
    for pk, (version, pool, index) in nodes.items():
        if pk not in _CACHE:
            _CACHE[pk] = _Entry(version, pool, distinct[index])


def shape_label(shape: Shape) -> str:
    """`cpu=4,memory=16Gi,nvidia.com/gpu=1`: the shape as a label value (requests as Kubernetes writes them)."""
    parts = [f"cpu={shape.cpu_milli // 1000}"]
    if shape.memory:
        parts.append(f"memory={format_bytes(shape.memory)}")
    parts += [f"{resource}={n}" for resource, n in shape.devices]
    return ",".join(parts)


def parse_shapes(text: str) -> list[Shape]:
    """`NUMAWEB_FLEET_SHAPES`: shapes separated by `;`, each `cpu[,memory][,resource=count...]` (e.g.
    `4,16Gi;8,32Gi,nvidia.com/gpu=1`); raises the engine's error naming the field."""
    shapes = []
    for item in filter(None, (s.strip() for s in text.split(";"))):
        cpu, *rest = [p.strip() for p in item.split(",")]
        memory = next((p for p in rest if "=" not in p), None)
        devices = ",".join(p for p in rest if "=" in p)
        shape = Shape.parse(cpu, memory, devices or None)
        if shape.cpu_milli % 1000:
            raise ValueError(f"NUMAWEB_FLEET_SHAPES: {item!r} must ask for whole CPUs")
        shapes.append(shape)
    return shapes


def pending_shapes(cluster_id: int) -> Counter[Shape]:
    """Pending pods per shape (pods that pin whole CPUs) of the cluster's jobs that do not hold all they need; each
    distinct pod template is read once (the database groups them)."""
    shapes: Counter[Shape] = Counter()
    for template, replicas in (Task.objects.filter(job__cluster_id=cluster_id, job__status__in=WAITING)
                               .values_list("template").annotate(n=Sum("replicas")).order_by()
                               .values_list("template", "n")):
        shape = _shape_of(template)
        if shape is not None:
            shapes[shape] += replicas
    return shapes


def _shape_of(template: dict) -> Shape | None:
    try:
        pod = pod_from_stored("p", template)
    except (EngineError, KeyError, TypeError, ValueError):
        return None
    cpus = pod_guaranteed_cpus(pod)
    if not cpus:
        return None
    devices = {r for c in pod.all_containers() for r in c.device_requests()}
    return Shape(cpus * 1000, pod_memory_request(pod).get("memory", 0),
                 tuple((r, pod_device_request(pod, r)) for r in sorted(devices)))


def pending_outcomes(cluster_id: int) -> Counter[str]:
    """Pods of the cluster's waiting jobs by their outcome in the cluster's newest finished session (`not_tried`
    for pods of jobs it did not consider)."""
    replicas: Counter[tuple[str, str]] = Counter()
    for ns, name, n in (Task.objects.filter(job__cluster_id=cluster_id, job__status__in=WAITING)
                        .values_list("job__namespace", "job__name", "replicas")):
        replicas[(ns, name)] += n
    outcomes: Counter[str] = Counter()
    session = (SchedulingSession.objects.filter(cluster_id=cluster_id, status=SchedulingSession.DONE)
               .order_by("-finished_at", "-id").values_list("pk", flat=True).first())
    seen: Counter[tuple[str, str]] = Counter()
    if session is not None:
        for ns, job, status, reason in (Placement.objects.filter(session_id=session)
                                        .values_list("namespace", "job", "status", "kubelet_reason")):
            if (ns, job) not in replicas:
                continue
            seen[(ns, job)] += 1
            outcomes[_outcome(status, reason)] += 1
    outcomes["not_tried"] = sum(max(n - seen[key], 0) for key, n in replicas.items())
    return outcomes


def _outcome(status: str, reason: str | None) -> str:
    if status == PodStatus.REJECTED:
        return "topology_affinity_error" if reason == "TopologyAffinityError" else "admission_error"
    outcomes: dict[str, str] = {PodStatus.ADMITTED: "placeable", PodStatus.UNSCHEDULABLE: "unplaceable",
                                PodStatus.ROLLED_BACK: "rolled_back"}
    return outcomes.get(status, "other")


class FleetCollector(Collector):
    """The fleet gauges, for every cluster (see the module's docstring)."""

    def collect(self) -> Iterator[Metric]:
        nodes = GaugeMetricFamily("numaweb_fleet_nodes", "Nodes the engine can read", labels=["cluster", "pool"])
        cpus = GaugeMetricFamily("numaweb_fleet_cpus_free", "CPUs the CPU Manager may still hand out",
                                 labels=["cluster", "pool"])
        devices = GaugeMetricFamily("numaweb_fleet_devices_free", "Healthy devices no pod holds",
                                    labels=["cluster", "pool", "resource"])
        blocks = GaugeMetricFamily("numaweb_fleet_numa_blocks",
                                   "NUMA nodes by how many free CPUs they have (single-NUMA free blocks by size)",
                                   labels=["cluster", "pool", "cpus"])
        lost = GaugeMetricFamily("numaweb_fleet_stranded_cpus",
                                 "Free CPUs on NUMA nodes where no pod of the shape fits aligned",
                                 labels=["cluster", "pool", "shape"])
        lost_devices = GaugeMetricFamily("numaweb_fleet_stranded_devices",
                                         "Free devices of the shape's resources on NUMA nodes where no pod of the "
                                         "shape fits aligned", labels=["cluster", "pool", "shape", "resource"])
        aligned = GaugeMetricFamily("numaweb_fleet_aligned_pods",
                                    "Pods of the shape that still fit on one NUMA node, each NUMA node on its own",
                                    labels=["cluster", "pool", "shape"])
        pending = GaugeMetricFamily("numaweb_fleet_shape_pending_pods", "Pending pods of the shape",
                                    labels=["cluster", "shape"])
        agents = GaugeMetricFamily("numaweb_fleet_agent_nodes",
                                   "Nodes a node agent reports, by whether it has been silent past "
                                   "NUMAWEB_AGENT_STALE_SECONDS", labels=["cluster", "state"])
        disagreements = GaugeMetricFamily("numaweb_fleet_agent_disagreements",
                                          "Where the model and the kubelet's checkpoints disagree, summed over the "
                                          "nodes agents report (the state check of each node's last changed report)",
                                          labels=["cluster"])
        outcomes = GaugeMetricFamily("numaweb_fleet_pending_pods",
                                     "Pods of waiting jobs by their outcome in the cluster's newest finished session",
                                     labels=["cluster", "outcome"])
        configured = parse_shapes(settings.NUMAWEB_FLEET_SHAPES)
        for cluster_id, cluster in Cluster.objects.order_by("name").values_list("pk", "name"):
            waiting = pending_shapes(cluster_id)
            shapes = [s for s, _n in waiting.most_common(settings.NUMAWEB_FLEET_MAX_SHAPES)]
            shapes += [s for s in configured if s not in shapes]
            for shape in shapes:
                pending.add_metric([cluster, shape_label(shape)], waiting.get(shape, 0))
            for outcome, n in sorted(pending_outcomes(cluster_id).items()):
                outcomes.add_metric([cluster, outcome], n)
            reported = NodeReport.objects.filter(node__cluster_id=cluster_id, node__removed_at__isnull=True)
            told = reported.aggregate(nodes=Count("pk"), disagreements=Sum("disagreements"),
                                      stale=Count("pk", filter=Q(received_at__lt=timezone.now() - stale_after())))
            agents.add_metric([cluster, "fresh"], told["nodes"] - told["stale"])
            agents.add_metric([cluster, "stale"], told["stale"])
            disagreements.add_metric([cluster], told["disagreements"] or 0)
            for pool, members in _pools(summaries(cluster_id)).items():
                labels = [cluster, pool]
                nodes.add_metric(labels, sum(members.values()))
                cpus.add_metric(labels, sum(s.free_cpus * n for s, n in members.items()))
                for resource, free in sorted(_devices(members).items()):
                    devices.add_metric([*labels, resource], free)
                for size, count in _blocks(members).items():
                    blocks.add_metric([*labels, size], count)
                for shape in shapes:
                    figures = stranded(members, shape)
                    label = shape_label(shape)
                    lost.add_metric([*labels, label], figures["cpus"])
                    aligned.add_metric([*labels, label], figures["aligned_pods"])
                    for resource, n in figures["devices"].items():
                        lost_devices.add_metric([*labels, label, resource], n)
        yield from (nodes, cpus, devices, blocks, lost, lost_devices, aligned, pending, outcomes, agents,
                    disagreements)


def _pools(rows: list[tuple[str, NodeFree]]) -> dict[str, Counter[NodeFree]]:
    """Summaries counted per pool; past NUMAWEB_FLEET_MAX_POOLS, the smallest pools fold into `other`."""
    pools: dict[str, Counter[NodeFree]] = {}
    for pool, free in rows:
        pools.setdefault(pool, Counter())[free] += 1
    limit = settings.NUMAWEB_FLEET_MAX_POOLS
    if len(pools) > limit:
        ranked = sorted(pools, key=lambda p: (-sum(pools[p].values()), p))
        other: Counter[NodeFree] = Counter()
        for pool in ranked[limit - 1:]:
            other.update(pools.pop(pool))
        pools[OTHER_POOL] = other
    return dict(sorted(pools.items()))


def _devices(members: Counter[NodeFree]) -> Counter[str]:
    free: Counter[str] = Counter()
    for summary, n in members.items():
        for resource, count in summary.devices:
            free[resource] += count * n
    return free


def _blocks(members: Counter[NodeFree]) -> dict[str, int]:
    out = {label: 0 for label, _lo, _hi in BLOCK_BINS}
    for summary, n in members.items():
        for numa in summary.numa:
            for label, lo, hi in BLOCK_BINS:
                if lo <= numa.cpus <= hi:
                    out[label] += n
                    break
    return out
