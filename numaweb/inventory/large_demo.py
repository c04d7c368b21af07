"""A large demo cluster for load: `manage.py demo --nodes N --pods M`.

Machines are real: ten files written by hwloc and lscpu on real servers (in `fixtures/`), each parsed
once and copied onto many nodes. Around them, a seeded mix of what real clusters hold: all four
Topology Manager policies, container and pod scope, reserved CPUs, CPU Manager options, GPUs and
NICs where the machine has them, and existing pinned pods (as imported from the kubelet's
cpu_manager_state) on about a third of the nodes. Then pending jobs totalling M pods, gang and not,
whose task policies, sizes and devices follow the same mix.

Rows are bulk-inserted; the engine validates each distinct machine × kubelet settings once, and the
existing allocations are whole cores of one NUMA node, free by construction. Nodes come in pools
(a machine in one of three kubelet configurations), as real fleets do."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from django.db import transaction

from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job, Task
from numaweb.progress import bar_over
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.topology import Topology

from . import services
from .models import Allocation, Cluster, Node

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

T = TypeVar("T")

FIXTURES = Path(__file__).parent / "fixtures"
GiB = 2**30
BATCH = 500

# short name, file, weight (how common the machine is in the cluster)
MACHINES = [
    ("xeon24", "24em64t-2n6c2t-pci.xml", 14),
    ("xeon32gpu", "32em64t-2n8c2t-pci-normalio.xml", 10),
    ("xeon28cod", "28intel64-2p2g7c-CoDgroups.v1tov2.xml", 10),
    ("xeon40", "40intel64-2g2n4c+pcilocality.xml", 12),
    ("xeon64x8", "64intel64-3g2n+2n-irregulargroups+pci.xml", 8),
    ("xeon72", "hwbench-cpu_info-cpustorage.txt", 14),
    ("xeon80", "memorysidecaches.xml", 10),
    ("opteron96", "96em64t-4n4d3ca2co-pci.xml", 8),
    ("power8gpu", "power8gpudistances.xml", 6),
    ("epyc384", "AMD-19h-Zen4-2xEpyc-9654.xml", 8),
]
POLICIES = [("none", 15), ("best-effort", 30), ("restricted", 25), ("single-numa-node", 30)]
CPU_SIZES = [(1, 15), (2, 30), (4, 30), (8, 16), (16, 7), (32, 2)]


@dataclass(frozen=True)
class Machine:
    short: str
    topology: Topology
    data: dict


def _pick(rng: random.Random, weighted: Sequence[tuple[T, int]]) -> T:
    return rng.choices([w[0] for w in weighted], weights=[w[-1] for w in weighted])[0]


def machines() -> list[tuple[Machine, int]]:
    """The corpus machines, parsed by the engine's importers (once per process)."""
    global _MACHINES
    if _MACHINES is None:
        out = []
        for short, file, weight in MACHINES:
            topology = services.load_topology_data((FIXTURES / file).read_bytes()).topology
            out.append((Machine(short, topology, topology.to_dict()), weight))
        _MACHINES = out
    return _MACHINES


_MACHINES: list[tuple[Machine, int]] | None = None


def _kubelet(rng: random.Random, topology: Topology) -> dict:
    """A plausible kubelet configuration for this machine."""
    settings: dict = {"cpu_manager_policy": "static", "topology_manager_policy": _pick(rng, POLICIES)}
    if rng.random() < 0.2:
        settings["topology_manager_scope"] = "pod"
    if rng.random() < 0.3:  # the first core's threads for the system
        first = topology.cpus[0]
        settings["reserved_cpus"] = str(CPUSet(topology.core_cpus[first.core]))
    roll = rng.random()
    if roll < 0.15 and topology.threads_per_core > 1:
        settings["cpu_manager_options"] = {"full-pcpus-only": "true"}
    elif roll < 0.2 and 1 < len(topology.numa_ids) <= 4:
        settings["cpu_manager_options"] = {"distribute-cpus-across-numa": "true"}
    if rng.random() < 0.1 and topology.distances and settings["topology_manager_policy"] != "none":
        settings["topology_manager_options"] = {"prefer-closest-numa-nodes": "true"}
    return settings


def _existing(rng: random.Random, topology: Topology, reserved: int, cluster: str, index: int) -> list[Allocation]:
    """One or two pinned pods, each whole cores of one NUMA node (free by construction)."""
    free = topology.all_cpus & ~reserved
    cores_by_numa: dict[int, list[int]] = {}
    for mask in topology.core_cpus.values():
        if mask & free == mask:
            numa = topology.cpu_info[(mask & -mask).bit_length() - 1].numa
            cores_by_numa.setdefault(numa, []).append(mask)
    rows = []
    for k in range(rng.randint(1, 2)):
        numa = min(cores_by_numa) if k == 0 else max(cores_by_numa)
        cores = cores_by_numa[numa]
        take = min(len(cores) // 2, rng.choice((2, 4)))
        if take <= 0:
            continue
        mask = 0
        for _ in range(take):
            mask |= cores.pop(0)
        rows.append(Allocation(pod=f"{cluster}/running-{index:05d}-{k}", container="app", cpus=str(CPUSet(mask)),
                               origin=Allocation.IMPORTED))
    return rows


def _job_data(rng: random.Random, name: str, replicas: int) -> dict:
    cpus = _pick(rng, CPU_SIZES)
    policy = _pick(rng, [*POLICIES, ("", 10)])
    requests = {"cpu": str(cpus), "memory": f"{2 * cpus}Gi"}
    if rng.random() < 0.03:
        requests["nvidia.com/gpu"] = "1"
    guaranteed = policy != "" or rng.random() < 0.5
    container = {"name": "main", "requests": requests}
    if guaranteed:
        container["limits"] = dict(requests)
    data = {"name": name, "priority": rng.choice((0, 0, 0, 10)),
            "tasks": [{"name": "worker", "replicas": replicas, "topology_policy": policy or None,
                       "template": {"containers": [container]}}]}
    if replicas > 1 and rng.random() < 0.5:
        data["min_available"] = replicas  # a gang: all or nothing
    return data


def build_large_demo(cluster_name: str, nodes: int, pods: int, seed: int = 1,
                     stdout: SupportsWrite[str] | None = None) -> Cluster:
    """Create (or replace) cluster `cluster_name` with `nodes` nodes and pending jobs in namespace
    `cluster_name` totalling `pods` pods, in one transaction. Same seed, same cluster."""
    rng = random.Random(seed)
    shapes = machines()
    with transaction.atomic():
        Cluster.objects.filter(name=cluster_name).delete()
        cluster = Cluster.objects.create(name=cluster_name,
                                         description=f"large demo: {nodes} nodes of real machines, {pods} pods")
        # node pools: each machine in three kubelet configurations, as fleets are managed
        pools = [(machine, KubeletConfig.from_dict(_kubelet(rng, machine.topology)), weight)
                 for machine, weight in shapes for _ in range(3)]
        checked: set[tuple] = set()
        rows, allocations = [], []
        for i in bar_over(range(nodes), nodes, "nodes", enabled=stdout is not None):
            machine, kubelet = rng.choices([p[:2] for p in pools], weights=[p[2] for p in pools])[0]
            topo = machine.topology
            node = Node(cluster=cluster, name=f"{machine.short}-{i:05d}", topology=machine.data,
                        num_cpus=len(topo.cpus), num_numa_nodes=len(topo.numa_ids),
                        num_sockets=topo.header.num_sockets, fingerprint=topo.fingerprint, source_format="demo")
            services.set_kubelet(node, kubelet)
            if (topo.fingerprint, kubelet) not in checked:  # the engine checks each distinct pair once
                services.to_engine(node, ())
                checked.add((topo.fingerprint, kubelet))
            rows.append(node)
            if rng.random() < 0.35:
                reserved = kubelet.reserved_cpus.mask if kubelet.reserved_cpus is not None else 0
                allocations.append((i, _existing(rng, topo, reserved, cluster_name, i)))
        Node.objects.bulk_create(rows, batch_size=BATCH)
        held = []
        for i, allocs in allocations:
            for a in allocs:
                a.node, a.cluster = rows[i], cluster
                held.append(a)
        Allocation.objects.bulk_create(held, batch_size=BATCH)

        jobs, tasks, left, n = [], [], pods, 0
        while left > 0:
            replicas = min(left, rng.choice((1, 1, 1, 2, 2, 4, 8)))
            data = _job_data(rng, f"job-{n:05d}", replicas)
            engine = job_services.engine_job_from_data({**data, "namespace": cluster_name})
            job_services.check_policy_cpus(engine)
            jobs.append(Job(cluster=cluster, name=engine.name, namespace=cluster_name, priority=engine.priority,
                            min_available=data.get("min_available"), source_format="json"))
            tasks.append([Task(name=t.name, replicas=t.replicas, topology_policy=t.topology_policy or "",
                               template=job_services.template_of(t.template)) for t in engine.tasks])
            left -= replicas
            n += 1
        Job.objects.bulk_create(jobs, batch_size=BATCH)
        for job, job_tasks in zip(jobs, tasks, strict=True):
            for t in job_tasks:
                t.job = job
        Task.objects.bulk_create([t for ts in tasks for t in ts], batch_size=BATCH)
    if stdout is not None:
        stdout.write(f"demo: cluster {cluster.name} with {nodes} nodes ({len(held)} running pods on "
                     f"{len(allocations)} of them), {len(jobs)} pending jobs with {pods} pods\n")
    return cluster
