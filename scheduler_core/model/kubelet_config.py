"""A node's kubelet settings (CPU, Topology and Memory Manager), parsed and validated the way the
kubelet does at start-up (ENGINE.md §2.4, §2.6), with the kubelet's error texts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import PolicyError, check_int
from .cpuset import CPUSet

CPU_MANAGER_POLICIES = ("none", "static")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
MEMORY_MANAGER_POLICIES = ("None", "Static")
TOPOLOGY_OPTIONS = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")
CPU_OPTIONS = (
    "full-pcpus-only", "distribute-cpus-across-numa", "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache", "align-by-socket", "distribute-cpus-across-cores",
)
_EXCLUSIVE_CPU_OPTIONS = (
    ("full-pcpus-only", "distribute-cpus-across-cores"),
    ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
)
DEFAULT_MAX_NUMA_NODES = 8
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_bool(name: str, value: object) -> bool:
    """Go's strconv.ParseBool spellings; anything else is the kubelet's `bad value` error."""
    if isinstance(value, bool):
        return value
    text = str(value)
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise PolicyError(f'bad value for option "{name}": invalid syntax {text!r}')


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    """Parsed Topology Manager policy options."""

    prefer_closest_numa_nodes: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_NUMA_NODES

    @classmethod
    def parse(cls, options: Mapping[str, object] | TopologyOptions | None) -> TopologyOptions:
        """Parse `{name: value}` as the kubelet does (options already parsed are kept); unknown names and
        bad values raise PolicyError."""
        if isinstance(options, TopologyOptions):
            return options
        prefer, max_nodes = False, DEFAULT_MAX_NUMA_NODES
        for name, value in (options or {}).items():
            if name == "prefer-closest-numa-nodes":
                prefer = parse_bool(name, value)
            elif name == "max-allowable-numa-nodes":
                if isinstance(value, bool):
                    raise PolicyError(f"unable to convert policy option to integer {name!r}: {value!r}")
                try:
                    max_nodes = int(str(value).strip())
                except ValueError:
                    raise PolicyError(
                        f"unable to convert policy option to integer {name!r}: {value!r}") from None
                if max_nodes < DEFAULT_MAX_NUMA_NODES:
                    raise PolicyError(
                        f'the minimum value of "{name}" should not be less than {DEFAULT_MAX_NUMA_NODES}')
            else:
                raise PolicyError(f'unknown Topology Manager Policy option: "{name}"')
        return cls(prefer, max_nodes)

    def to_dict(self) -> dict[str, str]:
        out = {}
        if self.prefer_closest_numa_nodes:
            out["prefer-closest-numa-nodes"] = "true"
        if self.max_allowable_numa_nodes != DEFAULT_MAX_NUMA_NODES:
            out["max-allowable-numa-nodes"] = str(self.max_allowable_numa_nodes)
        return out


@dataclass(frozen=True, slots=True)
class CPUOptions:
    """Parsed CPU Manager static-policy options."""

    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    strict_cpu_reservation: bool = False
    prefer_align_cpus_by_uncorecache: bool = False
    align_by_socket: bool = False
    distribute_cpus_across_cores: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, object] | CPUOptions | None) -> CPUOptions:
        if isinstance(options, CPUOptions):
            return options
        values: dict[str, bool] = {}
        for name, value in (options or {}).items():
            if name not in CPU_OPTIONS:
                raise PolicyError(f'unknown CPU Manager Policy option: "{name}"')
            values[name] = parse_bool(name, value)
        for a, b in _EXCLUSIVE_CPU_OPTIONS:
            if values.get(a) and values.get(b):
                raise PolicyError(f"static policy options {a} and {b} can not be used at the same time")
        return cls(**{k.replace("-", "_"): v for k, v in values.items()})

    def to_dict(self) -> dict[str, str]:
        return {name: "true" for name in CPU_OPTIONS if getattr(self, name.replace("-", "_"))}


def choice(value: object, allowed: tuple[str, ...], what: str, field: str) -> str:
    """The manager's own refusal of a name it does not know (`unknown policy: "x"`, `unknown scope:
    "x"`: the kubelet's texts); `field` names the setting."""
    if value not in allowed:
        raise PolicyError(f'unknown {what}: "{value}"', field)
    return str(value)


@dataclass(frozen=True)
class KubeletConfig:
    """The kubelet settings that decide NUMA alignment on a node.

    `reserved_cpus` is `reservedSystemCPUs` (an explicit list); otherwise `reserved_cpu_milli`
    (kube-reserved + system-reserved CPU) makes the CPU Manager pick `ceil(milli/1000)` CPUs itself.
    `reserved_memory` maps a NUMA id to `{resource: bytes}` (the Memory Manager's reservedMemory).
    """

    cpu_manager_policy: str = "none"
    cpu_manager_options: CPUOptions = field(default_factory=CPUOptions)
    reserved_cpus: CPUSet | None = None
    reserved_cpu_milli: int = 0
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    topology_manager_options: TopologyOptions = field(default_factory=TopologyOptions)
    memory_manager_policy: str = "None"
    reserved_memory: Mapping[int, Mapping[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        choice(self.cpu_manager_policy, CPU_MANAGER_POLICIES, "policy", "cpu_manager_policy")
        choice(self.topology_manager_policy, TOPOLOGY_POLICIES, "policy", "topology_manager_policy")
        choice(self.topology_manager_scope, TOPOLOGY_SCOPES, "scope", "topology_manager_scope")
        choice(self.memory_manager_policy, MEMORY_MANAGER_POLICIES, "policy", "memory_manager_policy")
        if not isinstance(self.cpu_manager_options, CPUOptions):
            object.__setattr__(self, "cpu_manager_options", CPUOptions.parse(self.cpu_manager_options))
        if not isinstance(self.topology_manager_options, TopologyOptions):
            object.__setattr__(self, "topology_manager_options",
                               TopologyOptions.parse(self.topology_manager_options))
        if isinstance(self.reserved_cpus, str):
            object.__setattr__(self, "reserved_cpus", CPUSet.parse(self.reserved_cpus))
        check_int(self.reserved_cpu_milli, "reserved CPU (millicores)", error=PolicyError)
        if self.cpu_manager_options.align_by_socket and self.topology_manager_policy == "single-numa-node":
            raise PolicyError("Topolgy manager single-numa-node policy is incompatible with CPUManager "
                              "align-by-socket policy option", "cpu_manager_options")  # sic: the kubelet's text
        for nid, resources in self.reserved_memory.items():
            for res, amount in resources.items():
                check_int(amount, f"reserved {res} on NUMA node {nid} (bytes)", error=PolicyError)

    def __hash__(self) -> int:
        # reserved_memory is a mapping: hash the canonical JSON (once) so node classes key on settings
        cached = self.__dict__.get("_hash")
        if cached is None:
            import json

            cached = hash(json.dumps(self.to_dict(), sort_keys=True))
            object.__setattr__(self, "_hash", cached)
        return cached

    @property
    def static_cpus(self) -> bool:
        return self.cpu_manager_policy == "static"

    @property
    def static_memory(self) -> bool:
        return self.memory_manager_policy == "Static"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu_manager_policy": self.cpu_manager_policy,
            "cpu_manager_options": self.cpu_manager_options.to_dict(),
            "reserved_cpus": None if self.reserved_cpus is None else str(self.reserved_cpus),
            "reserved_cpu_milli": self.reserved_cpu_milli,
            "topology_manager_policy": self.topology_manager_policy,
            "topology_manager_scope": self.topology_manager_scope,
            "topology_manager_options": self.topology_manager_options.to_dict(),
            "memory_manager_policy": self.memory_manager_policy,
            "reserved_memory": {str(n): dict(r) for n, r in sorted(self.reserved_memory.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> KubeletConfig:
        data = dict(data or {})
        known = {"cpu_manager_policy", "cpu_manager_options", "reserved_cpus", "reserved_cpu_milli",
                 "topology_manager_policy", "topology_manager_scope", "topology_manager_options",
                 "memory_manager_policy", "reserved_memory"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PolicyError(f"unknown kubelet setting {unknown[0]!r}")
        rm = data.get("reserved_memory") or {}
        try:
            data["reserved_memory"] = {int(k): dict(v) for k, v in rm.items()}
        except (TypeError, ValueError, AttributeError):
            raise PolicyError("reserved_memory must map NUMA ids to {resource: bytes}") from None
        reserved = data.get("reserved_cpus")
        if reserved is not None and not isinstance(reserved, CPUSet):
            data["reserved_cpus"] = CPUSet.parse(str(reserved))
        return cls(**data)
