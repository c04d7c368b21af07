"""The one rule a node needs from a manager: which CPUs its kubelet reserves for the system. The CPU
Manager's static policy owns that choice (`reservedSystemCPUs` as given, else `reserved_cpu_milli`
rounded up to CPUs picked by its CPU assignment); the package plugs it in here when it is imported
(`scheduler_core/__init__.py`), so the model calls no manager and no manager is imported for it."""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # as in scheduler_core/__init__.py: true for checkers, and `typing` stays unloaded
if TYPE_CHECKING:
    from .cpuset import CPUSet
    from .kubelet_config import KubeletConfig
    from .topology import Topology

#: (topology, kubelet settings) -> the reserved CPUs; None until the package plugs the CPU Manager's in
rule: Callable[[Topology, KubeletConfig], CPUSet] | None = None


def reserved_cpus(topology: Topology, kubelet: KubeletConfig) -> CPUSet:
    """The CPUs `kubelet` reserves on `topology` (only asked when it reserves some)."""
    if rule is None:
        raise RuntimeError("no reserved-CPU rule plugged in: import the scheduler_core package first")
    return rule(topology, kubelet)
