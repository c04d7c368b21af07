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
  explain_groups=64, held=(), dra=None)`` → ``SessionResult`` (``.to_dict()`` schema in ``explain``); ``profile``
  a name of ``PROFILES`` (``volcano``, ``aligned``, ``unaware``) or a ``Profile`` object such as
  ``VolcanoProfile(weight=10)``; ``progress(done, total)``; ``held``: uids of pods that already hold
  resources (not scheduled again, counted toward their job's gang); ``dra``: a ``DraState`` whose pods'
  claims are allocated on their node (ENGINE.md §8.5); admitted placements are recorded
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

from __future__ import annotations

from importlib import import_module

from .model import reserved as _reserved

# False at run time, true for type checkers (mypy and pyright treat the name so); unlike
# `typing.TYPE_CHECKING` it keeps `import scheduler_core` from loading `typing`.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the names checkers and IDEs see; at run time they are imported on first use
    from .errors import (
        CPUSetError,
        EngineError,
        FormatError,
        InsufficientResourcesError,
        PolicyError,
        RequestError,
        TopologyError,
    )
    from .formats import load_topology
    from .kubelet.admission import AdmitResult, TopologyAffinityError, admit_pod
    from .kubelet.cpumanager.cpu_assignment import take_by_topology
    from .kubelet.cpumanager.topology_hints import cpu_topology_hints
    from .kubelet.devicemanager.manager import filter_by_affinity
    from .kubelet.devicemanager.topology_hints import device_topology_hints
    from .kubelet.kubelet_start import StartVerdict, kubelet_start
    from .kubelet.memorymanager.policy_static import memory_topology_hints
    from .kubelet.topologymanager.hint import TopologyHint
    from .kubelet.topologymanager.merge import MergeResult, merge_hints
    from .model.cpuset import CPUSet
    from .model.jobs import Job, Task
    from .model.kubelet_config import CPUOptions, KubeletConfig, TopologyOptions
    from .model.node import Allocation, Node
    from .model.pods import Container, Pod
    from .model.topology import CPU, Device, Header, NUMANode, Topology
    from .scheduler.cluster import Cluster
    from .scheduler.explain import Outcome, PodStatus, SessionResult
    from .scheduler.profiles import PROFILES, AlignedProfile, Profile, UnawareProfile, VolcanoProfile, get_profile
    from .scheduler.room import RoomPlan, make_room
    from .scheduler.room_moves import Rules
    from .scheduler.session import run_session

#: the module that defines each public name
_MODULES = {
    "model.cpuset": ("CPUSet",),
    "errors": ("EngineError", "CPUSetError", "TopologyError", "RequestError", "PolicyError",
               "InsufficientResourcesError", "FormatError"),
    "model.topology": ("Topology", "CPU", "NUMANode", "Device", "Header"),
    "model.kubelet_config": ("KubeletConfig", "TopologyOptions", "CPUOptions"),
    "model.pods": ("Pod", "Container"),
    "kubelet.topologymanager.hint": ("TopologyHint",),
    "kubelet.topologymanager.merge": ("MergeResult", "merge_hints"),
    "kubelet.cpumanager.topology_hints": ("cpu_topology_hints",),
    "kubelet.cpumanager.cpu_assignment": ("take_by_topology",),
    "kubelet.devicemanager.manager": ("filter_by_affinity",),
    "kubelet.devicemanager.topology_hints": ("device_topology_hints",),
    "kubelet.memorymanager.policy_static": ("memory_topology_hints",),
    "model.node": ("Node", "Allocation"),
    "model.jobs": ("Job", "Task"),
    "kubelet.admission": ("admit_pod", "AdmitResult", "TopologyAffinityError"),
    "scheduler.session": ("run_session",),
    "scheduler.cluster": ("Cluster",),
    "scheduler.explain": ("Outcome", "PodStatus", "SessionResult"),
    "scheduler.profiles": ("Profile", "PROFILES", "get_profile", "VolcanoProfile", "AlignedProfile", "UnawareProfile"),
    "formats": ("load_topology",),
    "kubelet.kubelet_start": ("kubelet_start", "StartVerdict"),
    "scheduler.room": ("make_room", "RoomPlan"),
    "scheduler.room_moves": ("Rules",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "CPU",
    "PROFILES",
    "AdmitResult",
    "AlignedProfile",
    "Allocation",
    "CPUOptions",
    "CPUSet",
    "CPUSetError",
    "Cluster",
    "Container",
    "Device",
    "EngineError",
    "FormatError",
    "Header",
    "InsufficientResourcesError",
    "Job",
    "KubeletConfig",
    "MergeResult",
    "NUMANode",
    "Node",
    "Outcome",
    "Pod",
    "PodStatus",
    "PolicyError",
    "Profile",
    "RequestError",
    "RoomPlan",
    "Rules",
    "SessionResult",
    "StartVerdict",
    "Task",
    "Topology",
    "TopologyAffinityError",
    "TopologyError",
    "TopologyHint",
    "TopologyOptions",
    "UnawareProfile",
    "VolcanoProfile",
    "admit_pod",
    "cpu_topology_hints",
    "device_topology_hints",
    "filter_by_affinity",
    "get_profile",
    "kubelet_start",
    "load_topology",
    "make_room",
    "memory_topology_hints",
    "merge_hints",
    "run_session",
    "take_by_topology",
]


def _static_policy_reserved(topology: Topology, kubelet: KubeletConfig) -> CPUSet:
    """The CPU Manager's reserved CPUs for `model.reserved` (its module loads on the first node that
    reserves CPUs)."""
    policy = import_module(f"{__name__}.kubelet.cpumanager.cpu_manager")
    reserved: CPUSet = policy.reserved_cpu_set(topology, kubelet.reserved_cpus, kubelet.reserved_cpu_milli,
                                               kubelet.cpu_manager_options)
    return reserved


_reserved.rule = _static_policy_reserved


def __getattr__(name: str) -> object:
    """Import entry points on first use, so importing the package stays cheap."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'scheduler_core' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
