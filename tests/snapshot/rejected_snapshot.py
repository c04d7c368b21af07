"""kubectl snapshots with pods the kubelet rejected, for the rejected-pod tests and benchmark: nodes of
2 NUMA nodes described by a Numatopology, a NodeResourceTopology v1alpha2 and a Node, running pods, and Failed pods with
the kubelet's own rejection reasons and messages ("Pod was rejected: " + the admission error's text)."""

from __future__ import annotations

import yaml

GPU = "nvidia.com/gpu"
AFFINITY = ("TopologyAffinityError", "Pod was rejected: Resources cannot be allocated with Topology locality")
SMT = ("SMTAlignmentError", "Pod was rejected: SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2")
UNEXPECTED = ("UnexpectedAdmissionError", "Pod was rejected: Allocate failed due to requested number of devices "
              f"unavailable for {GPU}. Requested: 2, Available: 1, which is unexpected")


def node_objects(name: str, cpus_per_numa: int = 8, gpus: int = 2, policy: str = "single-numa-node") -> list[dict]:
    """A node of 2 NUMA nodes (`cpus_per_numa` CPUs each, two threads per core, CPU 0 reserved) described by
    a Numatopology, a NodeResourceTopology and a Node, with `gpus` GPUs on NUMA 1 only."""
    zones = []
    for n in range(2):
        resources: list[dict] = [
            {"name": "cpu", "capacity": cpus_per_numa, "allocatable": cpus_per_numa - (n == 0),
             "available": cpus_per_numa - (n == 0)},
            {"name": "memory", "capacity": str(16 << 30), "allocatable": str(16 << 30), "available": str(16 << 30)}]
        if n == 1 and gpus:
            resources.append({"name": GPU, "capacity": gpus, "allocatable": gpus, "available": gpus})
        zones.append({"name": f"node-{n}", "type": "Node", "resources": resources,
                      "costs": [{"name": f"node-{m}", "value": 10 if m == n else 20} for m in range(2)]})
    nrt = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology", "metadata": {"name": name},
           "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                          {"name": "topologyManagerScope", "value": "container"}], "zones": zones}
    total = 2 * cpus_per_numa
    detail = {str(c): {k: v for k, v in (("numa", c // cpus_per_numa), ("core", c // 2)) if v}
              for c in range(total)}  # two threads per core: CPUs 2k and 2k+1
    numatopo = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
                "spec": {"cpuDetail": detail, "numares": {"cpu": {"allocatable": f"1-{total - 1}", "capacity": total}},
                         "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy,
                                      "TopologyManagerScope": "container"}}}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"cpu": str(total), "memory": "32Gi", "pods": "110"},
                       "allocatable": {"cpu": str(total - 1), "memory": "32Gi", "pods": "110"}}}
    return [node, nrt, numatopo]


def pod(name: str, node: str, cpus: int, gpus: int = 0, *, created: int = 0, rejected: tuple[str, str] | None = None,
        job: str | None = None, namespace: str = "ml") -> dict:
    """A Guaranteed pod on `node`: running, or Failed with the kubelet's (reason, message)."""
    limits: dict[str, str] = {"cpu": str(cpus), "memory": "1Gi"}
    if gpus:
        limits[GPU] = str(gpus)
    meta: dict = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                  "creationTimestamp": f"2026-11-20T10:{created // 60:02d}:{created % 60:02d}Z"}
    if job:
        meta["annotations"] = {"volcano.sh/job-name": job, "scheduling.k8s.io/group-name": f"{job}-group"}
    status: dict = {"phase": "Running", "qosClass": "Guaranteed"}
    if rejected:
        status = {"phase": "Failed", "reason": rejected[0], "message": rejected[1], "qosClass": "Guaranteed",
                  "startTime": f"2026-11-20T11:{created // 60:02d}:{created % 60:02d}Z"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox",
                                                       "resources": {"limits": limits}}]},
            "status": status}


def as_yaml(items: list[dict]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False)


def every_reason() -> list[dict]:
    """One pod rejected for each reason, one the replay cannot reproduce, and a node that admits them.

    gpu-a (single-numa-node): `hog` (6 CPUs + 1 GPU) holds NUMA 1, the only NUMA node with GPUs, so
    `train-worker-0` (4 CPUs + 1 GPU) finds 2 free CPUs beside the free GPU: TopologyAffinityError; `smt`
    asks for 3 CPUs on 2-thread cores (SMTAlignmentError under full-pcpus-only). gpu-c (best-effort):
    `hog-c` holds a GPU, `greedy` asks for 2 where 1 is free (UnexpectedAdmissionError). `ghost` was
    rejected on gpu-b, where nothing holds anything now (not reproduced). gpu-b admits every one of them."""
    items = node_objects("gpu-a") + node_objects("gpu-b") + node_objects("gpu-c", policy="best-effort")
    items += [pod("hog", "gpu-a", 6, 1, created=1),
              pod("hog-c", "gpu-c", 2, 1, created=1),
              pod("train-worker-0", "gpu-a", 4, 1, created=2, rejected=AFFINITY, job="train"),
              pod("smt", "gpu-a", 3, created=3, rejected=SMT),
              pod("greedy", "gpu-c", 2, 2, created=4, rejected=UNEXPECTED),
              pod("ghost", "gpu-b", 2, 1, created=5, rejected=AFFINITY)]
    return items


def crowded() -> list[dict]:
    """Two full 2 × 4-CPU nodes (CPU 0 reserved): on each, `a1` takes 2 CPUs of NUMA 0 and `a2` 2 of NUMA 1,
    so `wide` (3 CPUs, single-numa-node) fits on neither until one small pod moves (make room), or the
    policy lets it span both NUMA nodes."""
    items = node_objects("full-a", cpus_per_numa=4, gpus=0) + node_objects("full-b", cpus_per_numa=4, gpus=0)
    for i, node in enumerate(("full-a", "full-b")):
        items += [pod(f"{node}-a1", node, 2, created=10 * i + 1), pod(f"{node}-a2", node, 2, created=10 * i + 2)]
    items.append(pod("wide", "full-a", 3, created=30, rejected=AFFINITY))
    return items
