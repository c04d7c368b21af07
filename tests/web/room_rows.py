"""The fragmented cluster of tests/scheduler/room_clusters.py as rows (nodes, their small pods' allocations)
and a pending gang job of 16-CPU single-numa-node pods, for the API, command, worker and browser tests."""

from __future__ import annotations

from numaweb.inventory import services
from numaweb.inventory.models import Cluster, Node
from numaweb.jobs.models import Job
from tests.scheduler.room_clusters import FRAGMENTED_TOPOLOGY, SMALL_PODS, SNN
from tests.web.helpers import make_job


def fragmented_rows(name: str = "frag", nodes: int = 6) -> Cluster:
    cluster = Cluster.objects.create(name=name)
    for i in range(nodes):
        node = Node(cluster=cluster, name=f"node-{i:02d}")
        services.set_topology(node, FRAGMENTED_TOPOLOGY, "synthetic")
        services.set_kubelet(node, SNN)
        node.save()
        for numa, cpus in SMALL_PODS:
            services.add_allocation(node, pod=f"batch/small-{i}-{numa}", container="app", cpus=cpus)
    return cluster


def gang_job(name: str = "train", pods: int = 4) -> Job:
    return make_job(name, cpus="16", replicas=pods, policy="single-numa-node")
