"""The kubelet's configuration file, `kind: KubeletConfiguration` (`/var/lib/kubelet/config.yaml`,
kubelet.config.k8s.io/v1beta1), as node settings and back.

Read: `cpuManagerPolicy`, `cpuManagerPolicyOptions`, `topologyManagerPolicy`, `topologyManagerScope`,
`topologyManagerPolicyOptions`, `memoryManagerPolicy`, `reservedSystemCPUs`, `reservedMemory`, and the
CPU of `kubeReserved` + `systemReserved` (the static policy's reserved count when no list is given).
Their memory, with `evictionHard`'s `memory.available` (the kubelet's default 100Mi when `evictionHard`
is absent), is the node-allocatable memory the Memory Manager checks `reservedMemory` against at start.
Every other field of the file's schema is accepted and left alone; a field the schema does not have,
a value of the wrong type, or a value the kubelet's validation refuses is a `FormatError` naming it.
Defaults are the kubelet's: policies `none` / `none` / `container` / `None`.

Write (`dump`): the settings as such a file, or merged into the file they came from (every other field
kept).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeGuard, TypeVar

from ..errors import EngineError, FormatError
from ..model.cpuset import CPUSet
from ..model.kubelet_config import (
    CPU_MANAGER_POLICIES,
    MEMORY_MANAGER_POLICIES,
    TOPOLOGY_POLICIES,
    TOPOLOGY_SCOPES,
    CPUOptions,
    KubeletConfig,
    TopologyOptions,
)
from ..model.quantity import count, cpu_milli, format_bytes
from ._documents import as_object, load_documents

KIND = "KubeletConfiguration"
API_VERSIONS = ("kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1")
DEFAULT_EVICTION_MEMORY = 100 << 20

_FIELD_NAMES = """
apiVersion kind enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency httpCheckFrequency
staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile tlsPrivateKeyFile tlsCipherSuites
tlsCurvePreferences tlsMinVersion rotateCertificates serverTLSBootstrap authentication authorization
registryPullQPS registryBurst imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist
eventRecordQPS eventBurst enableDebuggingHandlers enableContentionProfiling healthzPort healthzBindAddress
oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout nodeStatusUpdateFrequency
nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge
imageGCHighThresholdPercent imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups
cgroupRoot cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions
cpuManagerReconcilePeriod draManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy
topologyManagerScope topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode maxPods podCIDR
podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages maxOpenFiles contentType
kubeAPIQPS kubeAPIBurst serializeImagePulls maxParallelImagePulls evictionHard evictionSoft
evictionSoftGracePeriod evictionPressureTransitionPeriod evictionMaxPodGracePeriod evictionMinimumReclaim
mergeDefaultEvictionSettings podsPerCore enableControllerAttachDetach protectKernelDefaults
makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit featureGates failSwapOn memorySwap
containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers containerLogMonitorInterval
configMapAndSecretChangeDetectionStrategy systemReserved kubeReserved reservedSystemCPUs
showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable
allowedUnsafeSysctls volumePluginDir providerID kernelMemcgNotification logging enableSystemLogHandler
enableSystemLogQuery shutdownGracePeriod shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority
crashLoopBackOff reservedMemory enableProfilingHandler enableDebugFlagsHandler seccompDefault
memoryThrottlingFactor memoryReservationPolicy registerWithTaints registerNode tracing
localStorageCapacityIsolation containerRuntimeEndpoint imageServiceEndpoint failCgroupV1 userNamespaces
"""
#: every top-level field of KubeletConfiguration v1beta1 (json names)
FIELDS = frozenset(_FIELD_NAMES.split())


@dataclass
class KubeletFile:
    """A parsed KubeletConfiguration: the engine's settings, the node-allocatable memory reservation
    per memory type (what `reservedMemory` must add up to), and the whole document (for `dump`)."""

    config: KubeletConfig
    memory_reservation: dict[str, int] = field(default_factory=dict)
    document: dict[str, object] = field(default_factory=dict)


def is_kubelet_config(data: object) -> TypeGuard[Mapping[str, object]]:
    return isinstance(data, Mapping) and data.get("kind") == KIND


def _string(doc: Mapping[str, object], name: str, default: str | None = None) -> str | None:
    value = doc.get(name, default)
    if value is not None and not isinstance(value, str):
        raise FormatError(f"{KIND}: {name} must be a string, not {value!r}", name)
    return value


def _string_map(doc: Mapping[str, object], name: str) -> dict[str, str]:
    value = doc.get(name) or {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise FormatError(f"{KIND}: {name} must map names to values, not {value!r}", name)
    for k, v in value.items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise FormatError(f"{KIND}: {name}.{k} must be a string, not {v!r}", name)
    return {k: str(v) for k, v in value.items()}


_VALIDATION = {
    "topologyManagerPolicy": 'invalid configuration: topologyManagerPolicy (--topology-manager-policy) "{value}" must '
                             'be one of: ["best-effort" "none" "restricted" "single-numa-node"]',
    "topologyManagerScope": 'invalid configuration: topologyManagerScope (--topology-manager-scope) "{value}" must be '
                            'one of: "container", or "pod"',
}


def _choice(doc: Mapping[str, object], name: str, allowed: tuple[str, ...], default: str) -> str:
    """A policy or scope name, refused with the kubelet's text: its configuration validation for the
    Topology Manager's, the manager's own `unknown policy` for the CPU and Memory Managers'."""
    value = _string(doc, name, default) or default
    if value not in allowed:
        text = _VALIDATION.get(name, 'unknown policy: "{value}"').format(value=value)
        raise FormatError(f"{KIND}: {name}: {text}", name)
    return value


def _quantities(doc: Mapping[str, object], name: str) -> tuple[int, dict[str, int]]:
    """cpu (millicores) and memory types (bytes) of kubeReserved / systemReserved."""
    milli, memory = 0, {}
    for res, value in _string_map(doc, name).items():
        try:
            if res == "cpu":
                milli = cpu_milli(value, f"{name}.cpu")
            elif res == "memory" or res.startswith("hugepages-"):
                memory[res] = count(value, f"{name}.{res}")
        except EngineError as exc:
            raise FormatError(f"{KIND}: {exc}", name) from None
    return milli, memory


def _reserved_memory(doc: Mapping[str, object]) -> dict[int, dict[str, int]]:
    value = doc.get("reservedMemory") or []
    if not isinstance(value, list):
        raise FormatError(f"{KIND}: reservedMemory must be a list of {{numaNode, limits}}", "reservedMemory")
    out: dict[int, dict[str, int]] = {}
    for i, entry in enumerate(value):
        where = f"reservedMemory[{i}]"
        if not isinstance(entry, Mapping) or set(entry) - {"numaNode", "limits"}:
            raise FormatError(f"{KIND}: {where} must be {{numaNode, limits}}", "reservedMemory")
        nid = entry.get("numaNode")
        if isinstance(nid, bool) or not isinstance(nid, int) or nid < 0:
            raise FormatError(f"{KIND}: {where}.numaNode must be a NUMA id, not {nid!r}", "reservedMemory")
        limits = entry.get("limits") or {}
        if not isinstance(limits, Mapping):
            raise FormatError(f"{KIND}: {where}.limits must map memory types to quantities", "reservedMemory")
        for res, q in limits.items():
            if res != "memory" and not str(res).startswith("hugepages-"):
                raise FormatError(f"{KIND}: {where}.limits: {res} is not a memory type (memory or hugepages-<size>)",
                                  "reservedMemory")
            try:
                amount = count(q, f"{where}.limits.{res}")
            except EngineError as exc:
                raise FormatError(f"{KIND}: {exc}", "reservedMemory") from None
            if amount == 0:
                raise FormatError(f"{KIND}: {where}.limits.{res}: reserved memory may not be zero", "reservedMemory")
            if res in out.get(nid, {}):
                raise FormatError(f"{KIND}: {where}: NUMA node {nid} reserves {res} twice", "reservedMemory")
            out.setdefault(nid, {})[str(res)] = amount
    return out


def parse(text: str, name: str = KIND) -> KubeletFile:
    """Read a KubeletConfiguration (YAML or JSON); FormatError naming the field on anything wrong."""
    docs = [d for d in load_documents(text, name) if d is not None]
    if len(docs) != 1 or not is_kubelet_config(docs[0]):
        raise FormatError(f"{name}: expected one document of kind {KIND}")
    doc = dict(docs[0])
    if doc.get("apiVersion") not in API_VERSIONS:
        raise FormatError(f"{KIND}: apiVersion {doc.get('apiVersion')!r} is not one of {', '.join(API_VERSIONS)}",
                          "apiVersion")
    unknown = sorted(k for k in doc if k not in FIELDS)
    if unknown:
        raise FormatError(f'{KIND}: unknown field "{unknown[0]}"', unknown[0])
    kube_cpu, kube_memory = _quantities(doc, "kubeReserved")
    system_cpu, system_memory = _quantities(doc, "systemReserved")
    reserved_text = _string(doc, "reservedSystemCPUs", "") or ""
    try:
        reserved = CPUSet.parse(reserved_text) if reserved_text.strip() else None
    except EngineError as exc:
        raise FormatError(f"{KIND}: reservedSystemCPUs: {exc}", "reservedSystemCPUs") from None
    # each setting read (and refused) in this order before any is combined
    cpu_policy = _choice(doc, "cpuManagerPolicy", CPU_MANAGER_POLICIES, "none")
    cpu_options = _options(CPUOptions.parse, doc, "cpuManagerPolicyOptions")
    topology_policy = _choice(doc, "topologyManagerPolicy", TOPOLOGY_POLICIES, "none")
    topology_scope = _choice(doc, "topologyManagerScope", TOPOLOGY_SCOPES, "container")
    topology_options = _options(TopologyOptions.parse, doc, "topologyManagerPolicyOptions")
    memory_policy = _choice(doc, "memoryManagerPolicy", MEMORY_MANAGER_POLICIES, "None")
    reserved_memory = _reserved_memory(doc)
    try:
        config = KubeletConfig(
            cpu_manager_policy=cpu_policy, cpu_manager_options=cpu_options, reserved_cpus=reserved,
            reserved_cpu_milli=kube_cpu + system_cpu, topology_manager_policy=topology_policy,
            topology_manager_scope=topology_scope, topology_manager_options=topology_options,
            memory_manager_policy=memory_policy, reserved_memory=reserved_memory)
    except EngineError as exc:
        setting = _SETTING_FIELDS.get(exc.field or "", exc.field)
        raise FormatError(f"{KIND}: {setting}: {exc}" if setting else f"{KIND}: {exc}", setting) from None
    reservation = dict(kube_memory)
    for res, amount in system_memory.items():
        reservation[res] = reservation.get(res, 0) + amount
    reservation["memory"] = reservation.get("memory", 0) + _eviction_memory(doc)
    return KubeletFile(config, {r: b for r, b in reservation.items() if b}, doc)


_Options = TypeVar("_Options", CPUOptions, TopologyOptions)


def _options(parse: Callable[[Mapping[str, object]], _Options], doc: Mapping[str, object], name: str) -> _Options:
    try:
        return parse(_string_map(doc, name))
    except EngineError as exc:
        raise FormatError(f"{KIND}: {name}: {exc}", name) from None


def _eviction_memory(doc: Mapping[str, object]) -> int:
    """The hard eviction threshold of memory.available in bytes (a percentage counts 0: it depends on
    the machine's capacity, which this check does not take)."""
    if "evictionHard" not in doc:
        return DEFAULT_EVICTION_MEMORY
    value = _string_map(doc, "evictionHard").get("memory.available")
    if value is None or value.endswith("%"):
        return 0
    try:
        return count(value, "evictionHard.memory.available")
    except EngineError as exc:
        raise FormatError(f"{KIND}: {exc}", "evictionHard") from None


_SETTING_FIELDS = {
    "cpu_manager_policy": "cpuManagerPolicy", "cpu_manager_options": "cpuManagerPolicyOptions",
    "reserved_cpus": "reservedSystemCPUs", "reserved_cpu_milli": "kubeReserved",
    "topology_manager_policy": "topologyManagerPolicy", "topology_manager_scope": "topologyManagerScope",
    "topology_manager_options": "topologyManagerPolicyOptions", "memory_manager_policy": "memoryManagerPolicy",
    "reserved_memory": "reservedMemory",
}


def _milli_text(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def dump(config: KubeletConfig, base: Mapping[str, object] | None = None) -> str:
    """The settings as a KubeletConfiguration YAML; with `base` (a parsed document) every other field
    is kept. kube/system-reserved CPU: what `base` reserved is kept when the total is unchanged, else
    the difference goes to systemReserved."""
    import yaml

    doc: dict[str, object] = dict(base or {"apiVersion": API_VERSIONS[0], "kind": KIND})
    defaults = KubeletConfig()
    for key, name in (("cpuManagerPolicy", "cpu_manager_policy"), ("topologyManagerPolicy", "topology_manager_policy"),
                      ("topologyManagerScope", "topology_manager_scope"),
                      ("memoryManagerPolicy", "memory_manager_policy")):
        value = getattr(config, name)
        if value != getattr(defaults, name) or key in doc:
            doc[key] = value
    for key, options in (("cpuManagerPolicyOptions", config.cpu_manager_options.to_dict()),
                         ("topologyManagerPolicyOptions", config.topology_manager_options.to_dict())):
        if options:
            doc[key] = options
        else:
            doc.pop(key, None)
    if config.reserved_cpus:
        doc["reservedSystemCPUs"] = str(config.reserved_cpus)
    else:
        doc.pop("reservedSystemCPUs", None)
    kube = dict(as_object(doc.get("kubeReserved"), f"{KIND}: kubeReserved"))
    system = dict(as_object(doc.get("systemReserved"), f"{KIND}: systemReserved"))
    kube_milli = cpu_milli(kube["cpu"]) if "cpu" in kube else 0
    system_milli = cpu_milli(system["cpu"]) if "cpu" in system else 0
    if kube_milli + system_milli != config.reserved_cpu_milli:
        rest = config.reserved_cpu_milli - kube_milli
        if rest < 0:
            kube["cpu"], rest = _milli_text(config.reserved_cpu_milli), 0
        if rest:
            system["cpu"] = _milli_text(rest)
        else:
            system.pop("cpu", None)
    for key, table in (("kubeReserved", kube), ("systemReserved", system)):
        if table:
            doc[key] = table
        else:
            doc.pop(key, None)
    if config.reserved_memory:
        doc["reservedMemory"] = [{"numaNode": nid, "limits": {r: format_bytes(b) for r, b in sorted(res.items())}}
                                 for nid, res in sorted(config.reserved_memory.items())]
    else:
        doc.pop("reservedMemory", None)
    return yaml.safe_dump(doc, sort_keys=False)
