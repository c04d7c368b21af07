"""numaweb's scheduling engine: the kubelet's NUMA alignment and Volcano's numa-aware plugin in
pure Python (no Django, Celery or web imports anywhere below this package).

Entry points (stable; called from outside the project's own tests). CPU sets may be given as a
``CPUSet``, an int bitmask, a list of ids or a Linux list string; NUMA masks are ints (bit i = node i):

- ``CPUSet.parse(text)`` / ``str(cpuset)``: Linux cpuset list format (``0-3,8-11``, ``0-62:2``).
- ``merge_hints(policy, providers_hints, numa_nodes, options=None, distances=None)`` → ``MergeResult``
  (``.hint``: ``TopologyHint(affinity, preferred)``, ``.admit``): the Topology Manager merge for
  ``none``, ``best-effort``, ``restricted``, ``single-numa-node``; ``providers_hints`` is one entry per
  provider, each None, {} or {resource: None | [] | [hints]}; ``options`` the kubelet option strings
  (``prefer-closest-numa-nodes``, ``max-allowable-numa-nodes``); ``distances[a]`` node a's row
  (ENGINE.md §2.3).
- ``cpu_topology_hints(topology, available, reusable, request, align_by_socket=False)`` → list of
  ``TopologyHint`` in IterateBitMasks order (ENGINE.md §2.6).
- ``take_by_topology(topology, available, count, options=None)`` → ``CPUSet``; ``options`` a
  ``CPUOptions`` or the CPU Manager option strings (packed, spread, uncore, distributed; ENGINE.md §2.7).
- ``device_topology_hints(numa_nodes, devices, available, reusable, request)`` → list of hints (ENGINE.md §2.9).
- ``filter_by_affinity(devices, available, affinity)`` → ``(aligned, unaligned, no_affinity)`` sets of
  device ids, with the corrected NUMA ordering (ENGINE.md §2.9).
- ``memory_topology_hints(machine_state, requested=None, *, pod=None, container=None, ...)`` →
  ``{resource: [hints]}`` or None (ENGINE.md §2.8).
- ``admit_pod(node, pod, commit=True)`` → ``AdmitResult`` (``admitted``, ``error``: a
  ``TopologyAffinityError`` or other ``AdmissionError`` naming container and resource, ``allocations``,
  ``decisions`` with every provider's hints and the merge); a rejected pod never changes the node.
- ``run_session(cluster, jobs, profile="volcano", progress=None, weight=1, explain_names=10,
  explain_groups=64, held=())`` → ``SessionResult`` (``.to_dict()`` schema in ``explain``); ``profile``
  a name of ``PROFILES`` (``volcano``, ``aligned``, ``unaware``) or a ``Profile`` object such as
  ``VolcanoProfile(weight=10)``; ``progress(done, total)``; ``held``: uids of pods that already hold
  resources (not scheduled again, counted toward their job's gang); admitted placements are recorded
  on the given ``Cluster`` (copy it first for a what-if).
- ``make_room(cluster, job, profile="aligned", rules=None, priorities=None, held=(), max_moves=8,
  time_limit=8.0, max_checks=200, progress=None)`` → ``RoomPlan`` (``.found``, ``.fits_now``, ``.moves``,
  ``.evictions``, ``.minimal``, ``.lower_bound``, ``.check``: the verified plan's target session;
  ``.to_dict(cluster)``): the fewest pod moves after which ``job`` places, each re-admission a kubelet
  admission, every plan verified by a real session on a copy; ``rules`` a ``Rules`` (what may not move)
  (docs/MAKE_ROOM.md).
- ``load_topology(data, format=None)`` → ``Topology``: text, bytes or a path (file, sysfs folder or
  tarball), format detected from the content when None (``scheduler_core.formats``).
- ``kubelet_start(topology, config, cpu_state=None, memory_state=None, *, memory_reservation=None)`` →
  ``StartVerdict`` (``.starts``, ``.refusal`` with the kubelet's text, the file to delete and the next
  step, ``.default_cpuset``, ``.assignments``, ``.pods_to_move``): would a kubelet with ``config`` start
  with these checkpoint texts (ENGINE.md §2.10).

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
    "cpu_topology_hints": "cpu_hints", "take_by_topology": "cpu_take",
    "device_topology_hints": "devices", "filter_by_affinity": "devices",
    "memory_topology_hints": "memory",
    "Node": "node", "Allocation": "node", "Job": "jobs", "Task": "jobs",
    "admit_pod": "admission", "AdmitResult": "admission",
    "TopologyAffinityError": "admission",
    "run_session": "session", "Cluster": "session",
    "Profile": "profiles", "PROFILES": "profiles", "get_profile": "profiles",
    "VolcanoProfile": "profiles", "AlignedProfile": "profiles", "UnawareProfile": "profiles",
    "SessionResult": "session",
    "load_topology": "formats",
    "kubelet_start": "kubelet_start", "StartVerdict": "kubelet_start",
    "make_room": "room", "RoomPlan": "room", "Rules": "room_moves",
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
