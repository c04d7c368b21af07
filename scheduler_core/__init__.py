"""numaweb's scheduling engine: the kubelet's NUMA alignment and Volcano's numa-aware plugin in
pure Python (no Django, Celery or web imports anywhere below this package).

Entry points (stable; called from outside the project's own tests):

- ``CPUSet.parse(text)`` / ``str(cpuset)``: Linux cpuset list format (``0-3,8-11``).
- ``merge_hints(policy, providers_hints, numa_nodes, options=None, distances=None)``
  → ``MergeResult(hint, admit)``: the Topology Manager merge for ``none``, ``best-effort``,
  ``restricted`` and ``single-numa-node`` (kubelet-spec §4–6).
- ``cpu_topology_hints(topology, available, reusable, request, align_by_socket=False)``
  → list of ``TopologyHint`` (kubelet-spec §9.3).
- ``take_by_topology(topology, available, count, options=None)`` → ``CPUSet`` (§9.6, §10, §11).
- ``device_topology_hints(numa_nodes, devices, available, reusable, request)`` → list of hints (§12).
- ``filter_by_affinity(devices, available, affinity)`` → ``(aligned, unaligned, no_affinity)`` (§13).
- ``memory_topology_hints(machine_state, requested)`` → ``{resource: [hints]}`` (§14).
- ``admit_pod(node, pod)`` → ``AdmitResult`` (admitted, allocations, or ``TopologyAffinityError``).
- ``run_session(cluster, jobs, profile="volcano", progress=None)`` → ``SessionResult``.
- ``load_topology(data, format=None)`` → ``Topology`` (format auto-detected).

Units everywhere: CPU in millicores in requests, CPUs as ids; memory and hugepages in bytes.
Errors on bad input are subclasses of ``EngineError`` (a ``ValueError``) naming the offending value.
"""

from importlib import import_module

_EXPORTS = {
    "CPUSet": "cpuset",
    "EngineError": "errors", "CPUSetError": "errors", "TopologyError": "errors",
    "RequestError": "errors", "PolicyError": "errors", "InsufficientResourcesError": "errors",
    "FormatError": "errors",
    "BitMask": "bitmask",
    "Topology": "topology", "CPU": "topology", "NUMANode": "topology", "Device": "topology",
    "Header": "topology",
    "KubeletConfig": "kubelet", "TopologyOptions": "kubelet", "CPUOptions": "kubelet",
    "Pod": "pods", "Container": "pods",
    "TopologyHint": "hints", "MergeResult": "hints", "merge_hints": "hints",
    "cpu_topology_hints": "cpu", "take_by_topology": "cpu",
    "device_topology_hints": "devices", "filter_by_affinity": "devices",
    "memory_topology_hints": "memory",
    "Node": "node", "Allocation": "node", "Job": "jobs", "Task": "jobs",
    "admit_pod": "admission", "AdmitResult": "admission",
    "TopologyAffinityError": "admission",
    "run_session": "session", "Cluster": "session",
    "SessionResult": "session",
    "load_topology": "formats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Import entry points on first use, so importing the package stays cheap."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'scheduler_core' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
