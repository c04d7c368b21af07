"""The demo cluster: seed 001's three nodes (node-1 single-numa-node 16+16 CPUs, node-2 best-effort
16+16, node-3 best-effort 20+20), larger GPU nodes with other policies and scopes, two real machines
from hwloc XML files, some allocations (the seed's cpu_manager_state example) and a few jobs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from django.db import transaction

from numaweb.jobs import services as job_services
from scheduler_core.errors import EngineError
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.pods import GUARANTEED, Container, Pod
from scheduler_core.model.topology import synthetic

from . import services
from .models import Allocation, Cluster, Node

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

FIXTURES = Path(__file__).parent / "fixtures"
GiB = 2**30

# name, (sockets, numa per socket, cores per numa, threads), GPUs per NUMA, kubelet settings
SHAPES: list[tuple[str, tuple[int, int, int, int], int, dict[str, object]]] = [
    ("node-1", (2, 1, 16, 1), 0, {"topology_manager_policy": "single-numa-node"}),
    ("node-2", (2, 1, 16, 1), 0, {"topology_manager_policy": "best-effort"}),
    ("node-3", (2, 1, 20, 1), 0, {"topology_manager_policy": "best-effort"}),
    ("srv-gpu-1", (2, 2, 8, 2), 1, {"topology_manager_policy": "restricted", "topology_manager_scope": "pod",
                                "reserved_cpus": "0,32"}),
    ("srv-gpu-2", (2, 2, 8, 2), 1, {"topology_manager_policy": "restricted", "topology_manager_scope": "pod",
                                "reserved_cpus": "0,32"}),
    ("srv-gpu-3", (2, 2, 8, 2), 2, {"topology_manager_policy": "single-numa-node",
                                "cpu_manager_options": {"full-pcpus-only": "true"}}),
    ("srv-big-1", (2, 4, 12, 2), 0, {"topology_manager_policy": "best-effort",
                                 "topology_manager_options": {"prefer-closest-numa-nodes": "true"},
                                 "cpu_manager_options": {"distribute-cpus-across-numa": "true"}}),
    ("srv-plain-1", (1, 1, 8, 2), 0, {"topology_manager_policy": "none"}),
]
REAL = [("xml-24em64t", "24em64t-2n6c2t-pci.xml", {"topology_manager_policy": "best-effort"}),
        ("xml-96em64t", "96em64t-4n4d3ca2co-pci.xml", {"topology_manager_policy": "restricted"})]

# the seed's cpu_manager_state example (two 9-CPU containers) on the showcase node: the CPUs are those the
# node's own kubelet settings (restricted, pod scope, 0 and 32 reserved) give them, admitted in this order
SEED_ALLOCATIONS = [("srv-gpu-1", "default/fb15e10a-b6a5-4aaa-8fcd-76c1aa64e6fd", "container-1", 9),
                    ("srv-gpu-1", "default/777870b5-c64f-42f5-9296-688b9dc212ba", "container-1", 9)]


def _cpu(n: str, mem: str = "") -> dict:
    res = {"cpu": n}
    if mem:
        res["memory"] = mem
    return {"requests": res, "limits": dict(res)}


JOBS: list[dict[str, object]] = [
    {"name": "numa-test", "tasks": [{"name": "web", "replicas": 1, "topology_policy": "single-numa-node",
                                     "template": {"containers": [{"name": "container-1", **_cpu("2", "2048Mi")}]}}]},
    {"name": "vj-test", "min_available": 1,
     "tasks": [{"name": "test", "replicas": 1, "topology_policy": "best-effort",
                "template": {"containers": [{"name": "running", **_cpu("20", "100Mi")}]}}]},
    {"name": "train-gpu", "tasks": [{"name": "worker", "replicas": 2, "topology_policy": "restricted",
                                     "template": {"containers": [{
                                         "name": "trainer",
                                         "requests": {"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "1"},
                                         "limits": {"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "1"}}]}}]},
    {"name": "mpi-ring", "tasks": [{"name": "rank", "replicas": 4, "topology_policy": "best-effort",
                                    "template": {"containers": [{"name": "rank", **_cpu("8", "8Gi")}]}}]},
    {"name": "web-burst", "tasks": [{"name": "web", "replicas": 3,
                                     "template": {"containers": [{"name": "nginx",
                                                                  "requests": {"cpu": "500m", "memory": "256Mi"}}]}}]},
]


def build_demo(cluster_name: str = "demo", stdout: SupportsWrite[str] | None = None) -> Cluster:
    """Create (or refresh) the demo cluster and jobs. Idempotent: existing rows are replaced."""
    def say(text: str) -> None:
        if stdout is not None:
            stdout.write(text)

    with transaction.atomic():
        Cluster.objects.filter(name=cluster_name).delete()
        cluster = Cluster.objects.create(name=cluster_name, description="numaweb demo: seed 001's nodes and more")
        for name, shape, gpus, kubelet in SHAPES:
            topology = synthetic(*shape, memory_per_numa=64 * GiB,
                                 devices_per_numa={"nvidia.com/gpu": gpus} if gpus else None)
            node = Node(cluster=cluster, name=name)
            services.set_topology(node, topology, "synthetic")
            services.set_kubelet(node, KubeletConfig.from_dict({"cpu_manager_policy": "static", **kubelet}))
            services.validate_node(node)
            node.save()
        for name, file, settings in REAL:
            try:
                services.import_node(cluster, name, (FIXTURES / file).read_bytes(), None, settings)
            except (ImportError, EngineError) as exc:
                say(f"demo: skipped {file}: {exc}\n")
        for node_name, pod, container, count in SEED_ALLOCATIONS:
            node = Node.objects.get(cluster=cluster, name=node_name)
            engine = services.to_engine(node, node.allocations.all())
            res = {"cpu": count * 1000}  # as the kubelet's state check rebuilds a state file's pods
            admitted = admit_pod(engine, Pod(pod, (Container(container, res, res),), uid=pod, qos=GUARANTEED))
            if not admitted.admitted:
                raise EngineError(f"demo: {node_name} refuses {pod}: {admitted.error}")
            services.add_allocation(node, pod=pod, container=container, cpus=str(admitted.cpus),
                                    origin=Allocation.IMPORTED)
        for data in JOBS:
            job_services.save_job(job_services.engine_job_from_data(data), cluster, source_format="json",
                                  explicit_min="min_available" in data)
    say(f"demo: cluster {cluster.name} with {cluster.nodes.count()} nodes, {len(JOBS)} jobs\n")
    return cluster
