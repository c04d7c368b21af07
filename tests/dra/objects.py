"""kubectl's DRA objects for the DRA tests, built from their fields: slices of two drivers that publish the
NUMA node under different names (a GPU driver `numaNode` in its own domain, DraNet `dra.net/numaNode`), a
driver publishing only the standard attribute, one publishing only a pcieRoot, classes, claims and pods."""

from __future__ import annotations

GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "dra.net"


def attr(value: bool | int | str) -> dict:
    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
    return {kind: value}


def device(name: str, **attributes: bool | int | str) -> dict:
    return {"name": name, "attributes": {k: attr(v) for k, v in attributes.items()}}


def resource_slice(name: str, driver: str, node: str | None, devices: list[dict], *, pool: str | None = None,
                   generation: int = 1, count: int = 1, all_nodes: bool = False) -> dict:
    spec: dict = {"driver": driver, "pool": {"name": pool or node or name, "generation": generation,
                                             "resourceSliceCount": count}, "devices": devices}
    if node:
        spec["nodeName"] = node
    if all_nodes:
        spec["allNodes"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def device_class(name: str, *expressions: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


def claim(name: str, requests: list[dict], *, namespace: str = "ml", constraints: list[dict] | None = None,
          results: list[tuple[str, str, str, str]] | None = None, reserved_for: list[str] = ()) -> dict:
    """A ResourceClaim; `results` (request, driver, pool, device) make its allocation."""
    obj: dict = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": name, "namespace": namespace},
                 "spec": {"devices": {"requests": requests, "constraints": constraints or []}}}
    status: dict = {}
    if results is not None:
        status["allocation"] = {"devices": {"results": [dict(zip(("request", "driver", "pool", "device"), r,
                                                                 strict=True)) for r in results]}}
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved_for]
    if status:
        obj["status"] = status
    return obj


def exactly(name: str, device_class_name: str, count: int = 1, *selectors: str, mode: str = "ExactCount") -> dict:
    body: dict = {"deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def pod_with_claims(name: str, node: str, claims: dict[str, str], *, templates: dict[str, str] | None = None,
                    generated: dict[str, str] | None = None, namespace: str = "ml", cpus: int = 2) -> dict:
    """A Guaranteed running pod using `claims` (pod claim name → ResourceClaim name) and `templates` (pod
    claim name → template name, generated claims named in its status by `generated`)."""
    refs = [{"name": k, "resourceClaimName": v} for k, v in claims.items()]
    refs += [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    limits = {"cpu": str(cpus), "memory": "1Gi"}
    status: dict = {"phase": "Running", "qosClass": "Guaranteed"}
    if generated:
        status["resourceClaimStatuses"] = [{"name": k, "resourceClaimName": v} for k, v in generated.items()]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "creationTimestamp": "2026-11-20T10:00:00Z"},
            "spec": {"nodeName": node, "resourceClaims": refs,
                     "containers": [{"name": "app", "image": "busybox",
                                     "resources": {"limits": limits, "requests": limits,
                                                   "claims": [{"name": k} for k in [*claims, *(templates or {})]]}}]},
            "status": status}


def gpu_node_slices(node: str, numa_of_gpu: list[int], numa_of_nic: list[int]) -> list[dict]:
    """A GPU driver publishing `gpu.example.com/numaNode` (unqualified `numaNode`) and DraNet publishing
    `dra.net/numaNode` (unqualified too: the driver's domain is dra.net)."""
    gpus = [device(f"gpu-{i}", numaNode=n, model="A100") for i, n in enumerate(numa_of_gpu)]
    nics = [device(f"eth{i}", numaNode=n, rdma=True) for i, n in enumerate(numa_of_nic)]
    return [resource_slice(f"{node}-gpu", GPU_DRIVER, node, gpus),
            resource_slice(f"{node}-net", NIC_DRIVER, node, nics)]


def numatopology_node(name: str, cpus_per_numa: int = 4, numas: int = 2) -> list[dict]:
    """A node of `numas` NUMA nodes, one CPU per core, described by a Numatopology (CPUs 0.. on NUMA 0, ...)."""
    total = cpus_per_numa * numas
    detail = {str(c): {"numa": c // cpus_per_numa, "core": c, "socket": 0} for c in range(total)}
    return [{"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
             "spec": {"cpuDetail": detail, "numares": {"cpu": {"allocatable": f"0-{total - 1}", "capacity": total}},
                      "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node",
                                   "TopologyManagerScope": "container"}}}]
