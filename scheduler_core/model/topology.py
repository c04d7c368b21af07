"""A machine: CPUs (core, socket, NUMA node, uncore cache), NUMA nodes with memory and hugepages,
NUMA distances and devices, validated once and indexed as int bitmasks for the hot paths.

The kubelet derives CPUs-per-core/socket/uncore and its NUMA-first choice from the CPU topology's
*declared* scalars (ENGINE.md §2.7), which upstream fixtures sometimes leave at 0; `Header`
carries them and defaults to the values counted from the CPU list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import TopologyError, check_int
from .cpuset import CPUSet

JSON_KIND = "numaweb.topology"
JSON_VERSION = 1


@dataclass(frozen=True, slots=True)
class CPU:
    """One logical CPU (hardware thread). `core` ids are unique machine-wide (the kubelet uses the
    smallest thread id of the core); `uncore` is the last-level cache id (the socket when unknown)."""

    id: int
    core: int
    socket: int
    numa: int
    uncore: int = 0


@dataclass(frozen=True, slots=True)
class NUMANode:
    """A NUMA node's memory in bytes; `hugepages` maps `hugepages-<size>` to bytes."""

    id: int
    memory: int = 0
    hugepages: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Device:
    """A device-plugin device. `numa` is None when the device reports no topology, `()` when it
    reports a topology without NUMA nodes (ENGINE.md §2.9); both mean "no NUMA affinity"."""

    id: str
    resource: str
    numa: tuple[int, ...] | None = None
    healthy: bool = True
    name: str = ""


@dataclass(frozen=True, slots=True)
class Header:
    """The CPU topology's declared scalars (kubelet `CPUTopology`)."""

    num_cpus: int
    num_sockets: int
    num_cores: int
    num_numa_nodes: int
    num_uncore_caches: int


def _int(value: object, what: str) -> int:
    return check_int(value, what, error=TopologyError)


class Topology:
    """An immutable, validated machine topology with int-bitmask indexes.

    Indexes (all CPU sets are int masks, bit i = CPU i): `numa_cpus`, `socket_cpus`, `core_cpus`,
    `uncore_cpus` map an id to its CPUs; `cpu_info` maps a CPU id to its `CPU`.
    """

    __slots__ = (
        "_declared_header",
        "_fingerprint",
        "_numa_index",
        "all_cpus",
        "core_cpus",
        "cpu_info",
        "cpu_numa_ids",
        "cpus",
        "cpus_per_core",
        "cpus_per_socket",
        "cpus_per_uncore",
        "description",
        "devices",
        "distances",
        "header",
        "inferred",
        "numa_cpus",
        "numa_first",
        "numa_ids",
        "numa_nodes",
        "numa_sockets",
        "offline_cpus",
        "socket_cpus",
        "socket_numas",
        "uncore_cpus",
    )

    def __init__(
        self,
        cpus: Iterable[CPU],
        numa_nodes: Iterable[NUMANode] | None = None,
        distances: Mapping[int, Iterable[int]] | None = None,
        devices: Iterable[Device] = (),
        header: Header | None = None,
        offline_cpus: CPUSet | None = None,
        inferred: Iterable[str] = (),
        description: str = "",
    ) -> None:
        cpu_list, info = _checked_cpus(cpus)
        self.cpus: tuple[CPU, ...] = tuple(cpu_list)
        self.cpu_info = info
        cpu_numas = sorted({c.numa for c in cpu_list})
        nodes = _checked_numa_nodes(numa_nodes, cpu_list, cpu_numas)
        self.numa_nodes: tuple[NUMANode, ...] = nodes
        self.numa_ids: tuple[int, ...] = tuple(n.id for n in nodes)
        self.cpu_numa_ids: tuple[int, ...] = tuple(cpu_numas)
        self._numa_index = {nid: i for i, nid in enumerate(self.numa_ids)}
        self.distances = _checked_distances(distances, self.numa_ids) if distances else None
        self.devices: tuple[Device, ...] = _checked_devices(devices, self._numa_index)
        self._index_cpus(cpu_list)
        self._set_header(header, Header(len(cpu_list), len(self.socket_cpus), len(self.core_cpus), len(cpu_numas),
                                        len(self.uncore_cpus)))
        offline_cpus = offline_cpus or CPUSet()
        if offline_cpus & CPUSet(info):
            raise TopologyError(f"CPUs {offline_cpus & CPUSet(info)} are both online and offline")
        self.offline_cpus = offline_cpus
        self.inferred = tuple(sorted(set(inferred)))
        self.description = description
        self._fingerprint: str | None = None

    def _index_cpus(self, cpu_list: list[CPU]) -> None:
        """The CPU masks of every NUMA node, socket, core and uncore cache, and which sockets share
        a NUMA node (the indexes the hot paths AND and count)."""
        numa_cpus: dict[int, int] = {n: 0 for n in self.numa_ids}
        socket_cpus: dict[int, int] = {}
        core_cpus: dict[int, int] = {}
        uncore_cpus: dict[int, int] = {}
        numa_sockets: dict[int, set[int]] = {n: set() for n in self.numa_ids}
        socket_numas: dict[int, set[int]] = {}
        for c in cpu_list:
            bit = 1 << c.id
            numa_cpus[c.numa] |= bit
            socket_cpus[c.socket] = socket_cpus.get(c.socket, 0) | bit
            core_cpus[c.core] = core_cpus.get(c.core, 0) | bit
            uncore_cpus[c.uncore] = uncore_cpus.get(c.uncore, 0) | bit
            numa_sockets[c.numa].add(c.socket)
            socket_numas.setdefault(c.socket, set()).add(c.numa)
        self.all_cpus = CPUSet(self.cpu_info).mask
        self.numa_cpus = numa_cpus
        self.socket_cpus = dict(sorted(socket_cpus.items()))
        self.core_cpus = dict(sorted(core_cpus.items()))
        self.uncore_cpus = dict(sorted(uncore_cpus.items()))
        self.numa_sockets = {n: tuple(sorted(s)) for n, s in numa_sockets.items()}
        self.socket_numas = {s: tuple(sorted(n)) for s, n in sorted(socket_numas.items())}

    def _set_header(self, header: Header | None, counted: Header) -> None:
        """The declared header (a source may state counts the CPU list does not show), else the
        counted one, and the per-core / socket / uncore sizes derived from it."""
        self._declared_header = header is not None and header != counted
        h = header or counted
        for attr in ("num_cpus", "num_sockets", "num_cores", "num_numa_nodes", "num_uncore_caches"):
            _int(getattr(h, attr), f"header {attr}")
        self.header = h
        self.cpus_per_core = h.num_cpus // h.num_cores if h.num_cores else 0
        self.cpus_per_socket = h.num_cpus // h.num_sockets if h.num_sockets else 0
        self.cpus_per_uncore = h.num_cpus // h.num_uncore_caches if h.num_uncore_caches else 0
        self.numa_first = h.num_sockets >= h.num_numa_nodes

    @property
    def fingerprint(self) -> str:
        """Content hash: equal for identical machines however they were built (for node classes)."""
        if self._fingerprint is None:
            import hashlib
            import json

            text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
            self._fingerprint = hashlib.sha1(text.encode()).hexdigest()
        return self._fingerprint

    # -- derived views -------------------------------------------------------------------------
    def cpuset(self) -> CPUSet:
        """All (online) CPUs."""
        return CPUSet(self.all_cpus)

    def cpus_in_numa(self, numa_ids: Iterable[int]) -> CPUSet:
        mask = 0
        for n in numa_ids:
            mask |= self.numa_cpus.get(n, 0)
        return CPUSet(mask)

    def numa_mask_of_cpus(self, cpus: CPUSet | int) -> int:
        """NUMA affinity mask (bit = NUMA id) of the NUMA nodes holding any of `cpus`."""
        mask = cpus if isinstance(cpus, int) else cpus.mask
        out = 0
        for nid, ncpus in self.numa_cpus.items():
            if ncpus & mask:
                out |= 1 << nid
        return out

    def distance(self, a: int, b: int) -> int | None:
        """Distance between NUMA nodes `a` and `b` (None when the topology has no distances)."""
        if self.distances is None:
            return None
        return self.distances[a][self._numa_index[b]]

    def mean_distance(self, mask: int) -> float | None:
        """Mean distance over every ordered pair of NUMA nodes in `mask`, self pairs included (the
        kubelet's CalculateAverageFor); None without distances or for an empty mask."""
        ids = [n for n in self.numa_ids if mask >> n & 1]
        if not ids or self.distances is None:
            return None
        rows, index = self.distances, self._numa_index
        return sum(rows[a][index[b]] for a in ids for b in ids) / (len(ids) * len(ids))

    def numa_node(self, nid: int) -> NUMANode:
        return self.numa_nodes[self._numa_index[nid]]

    def devices_of(self, resource: str) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.resource == resource)

    def device_resources(self) -> tuple[str, ...]:
        return tuple(sorted({d.resource for d in self.devices}))

    @property
    def threads_per_core(self) -> int:
        return max(m.bit_count() for m in self.core_cpus.values())

    # -- JSON ------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The engine's JSON form; `Topology.from_dict(t.to_dict()) == t` and the reverse hold."""
        out: dict[str, Any] = {
            "kind": JSON_KIND,
            "version": JSON_VERSION,
            "cpus": [{"cpu": c.id, "core": c.core, "socket": c.socket, "numa": c.numa, "uncore": c.uncore}
                     for c in self.cpus],
            "numa_nodes": [{"id": n.id, "memory": n.memory, "hugepages": dict(sorted(n.hugepages.items()))}
                           for n in self.numa_nodes],
        }
        if self.distances is not None:
            out["distances"] = [list(self.distances[nid]) for nid in self.numa_ids]
        if self.devices:
            out["devices"] = [
                {"id": d.id, "resource": d.resource, "numa": None if d.numa is None else list(d.numa),
                 "healthy": d.healthy, "name": d.name}
                for d in self.devices
            ]
        if self._declared_header:
            h = self.header
            out["header"] = {"num_cpus": h.num_cpus, "num_sockets": h.num_sockets, "num_cores": h.num_cores,
                             "num_numa_nodes": h.num_numa_nodes, "num_uncore_caches": h.num_uncore_caches}
        if self.offline_cpus:
            out["offline_cpus"] = str(self.offline_cpus)
        if self.inferred:
            out["inferred"] = list(self.inferred)
        if self.description:
            out["description"] = self.description
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Build from the engine's JSON form, with errors that name the offending entry."""
        if not isinstance(data, Mapping):
            raise TopologyError("a topology must be a JSON object")
        if data.get("kind", JSON_KIND) != JSON_KIND:
            raise TopologyError(f"not a numaweb topology: kind is {data.get('kind')!r}")
        raw_cpus = data.get("cpus")
        if not isinstance(raw_cpus, list):
            raise TopologyError("'cpus' must be a list of {cpu, core, socket, numa, uncore} objects")
        cpus = []
        for i, entry in enumerate(raw_cpus):
            if not isinstance(entry, Mapping) or "cpu" not in entry:
                raise TopologyError(f"cpus[{i}] must be an object with a 'cpu' id")
            cpu_id = _int(entry["cpu"], f"cpus[{i}].cpu")
            if entry.get("numa") is None:
                raise TopologyError(f"CPU {cpu_id} has no NUMA node")
            socket = entry.get("socket", 0)
            cpus.append(CPU(cpu_id, entry.get("core", cpu_id), socket, entry["numa"], entry.get("uncore", socket)))
        nodes = None
        if data.get("numa_nodes") is not None:
            nodes = []
            for i, n in enumerate(data["numa_nodes"]):
                if not isinstance(n, Mapping) or "id" not in n:
                    raise TopologyError(f"numa_nodes[{i}] must be an object with an 'id'")
                hp = n.get("hugepages") or {}
                if not isinstance(hp, Mapping):
                    raise TopologyError(f"numa_nodes[{i}].hugepages must be an object")
                nodes.append(NUMANode(n["id"], n.get("memory", 0), dict(hp)))
        distances = None
        if data.get("distances") is not None:
            ids = [n.id for n in nodes] if nodes is not None else sorted({c.numa for c in cpus})
            rows = data["distances"]
            if not isinstance(rows, list) or len(rows) != len(ids):
                raise TopologyError(f"'distances' must be a list of {len(ids)} rows, one per NUMA node")
            distances = dict(zip(ids, rows, strict=True))
        devices = []
        for i, d in enumerate(data.get("devices") or ()):
            if not isinstance(d, Mapping):
                raise TopologyError(f"devices[{i}] must be an object")
            numa = d.get("numa")
            devices.append(Device(str(d.get("id", "")), str(d.get("resource", "")),
                                  None if numa is None else tuple(numa), bool(d.get("healthy", True)),
                                  str(d.get("name", ""))))
        header = None
        if data.get("header") is not None:
            h = data["header"]
            try:
                header = Header(h["num_cpus"], h["num_sockets"], h["num_cores"], h["num_numa_nodes"],
                                h.get("num_uncore_caches", 0))
            except (KeyError, TypeError) as exc:
                raise TopologyError(f"'header' is missing {exc}") from exc
        return cls(cpus, nodes, distances, devices, header,
                   CPUSet.parse(data.get("offline_cpus", "")), data.get("inferred", ()),
                   str(data.get("description", "")))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash((self.all_cpus, self.numa_ids, len(self.devices)))

    def __repr__(self) -> str:
        h = self.header
        return (f"Topology({h.num_cpus} CPUs, {h.num_sockets} sockets, {len(self.numa_ids)} NUMA nodes, "
                f"{h.num_cores} cores, {len(self.devices)} devices)")


def synthetic(sockets: int, numa_per_socket: int, cores_per_numa: int, threads: int,
              memory_per_numa: int = 0, devices_per_numa: Mapping[str, int] | None = None) -> Topology:
    """A regular machine in Linux numbering: thread t of core c has CPU id `t * total_cores + c`.

    Handy for tests, benchmarks and demos (`synthetic(2, 2, 16, 2)` is 2 sockets × 2 NUMA × 16 cores
    × 2 threads).
    """
    for name, value in (("sockets", sockets), ("numa_per_socket", numa_per_socket),
                        ("cores_per_numa", cores_per_numa), ("threads", threads)):
        check_int(value, name, 1, error=TopologyError)
    total_cores = sockets * numa_per_socket * cores_per_numa
    cpus = []
    for core in range(total_cores):
        numa = core // cores_per_numa
        socket = numa // numa_per_socket
        for t in range(threads):
            cpus.append(CPU(t * total_cores + core, core, socket, numa, socket))
    n_numa = sockets * numa_per_socket
    nodes = [NUMANode(n, memory_per_numa) for n in range(n_numa)]
    distances = {a: [10 if a == b else (12 if a // numa_per_socket == b // numa_per_socket else 21)
                     for b in range(n_numa)] for a in range(n_numa)}
    devices = []
    for resource, per_numa in (devices_per_numa or {}).items():
        short = resource.rsplit("/", 1)[-1]
        for n in range(n_numa):
            for i in range(per_numa):
                devices.append(Device(f"{short}{n * per_numa + i}", resource, (n,)))
    return Topology(cpus, nodes, distances, devices)


# -- the constructor's checks ---------------------------------------------------------------------------

def _checked_cpus(cpus: Iterable[CPU]) -> tuple[list[CPU], dict[int, CPU]]:
    """The CPUs by id (at least one, each once, with integer ids and a NUMA node)."""
    cpu_list = sorted(cpus, key=lambda c: c.id if isinstance(c.id, int) else -1)
    if not cpu_list:
        raise TopologyError("a topology needs at least one CPU")
    info: dict[int, CPU] = {}
    for c in cpu_list:
        _int(c.id, "CPU id")
        if c.id in info:
            raise TopologyError(f"CPU {c.id} is listed twice")
        if c.numa is None:
            raise TopologyError(f"CPU {c.id} has no NUMA node")
        for attr in ("core", "socket", "numa", "uncore"):
            _int(getattr(c, attr), f"{attr} of CPU {c.id}")
        info[c.id] = c
    return cpu_list, info


def _checked_numa_nodes(numa_nodes: Iterable[NUMANode] | None, cpu_list: list[CPU],
                        cpu_numas: list[int]) -> tuple[NUMANode, ...]:
    """The NUMA nodes by id (those of the CPUs when none are given): each once, sizes and hugepage
    names valid, every CPU's node among them, at most 64 with ids below 64 (the kubelet's mask)."""
    if numa_nodes is None:
        nodes = tuple(NUMANode(n) for n in cpu_numas)
    else:
        nodes = tuple(sorted(numa_nodes, key=lambda n: n.id))
        seen: set[int] = set()
        for n in nodes:
            _int(n.id, "NUMA node id")
            if n.id in seen:
                raise TopologyError(f"NUMA node {n.id} is listed twice")
            seen.add(n.id)
            _int(n.memory, f"memory of NUMA node {n.id}")
            for size, amount in n.hugepages.items():
                if not str(size).startswith("hugepages-"):
                    raise TopologyError(f"hugepages key {size!r} of NUMA node {n.id} must look like hugepages-2Mi")
                _int(amount, f"{size} of NUMA node {n.id}")
        for c in cpu_list:
            if c.numa not in seen:
                raise TopologyError(
                    f"CPU {c.id} is on NUMA node {c.numa}, which is not among the NUMA nodes {sorted(seen)}")
    if len(nodes) > 64:
        raise TopologyError(f"{len(nodes)} NUMA nodes: at most 64 are supported (the kubelet's mask width)")
    if any(n.id > 63 for n in nodes):
        raise TopologyError(f"NUMA node id {max(n.id for n in nodes)} is above 63, the kubelet's mask width")
    return nodes


def _checked_distances(distances: Mapping[int, Iterable[int]],
                       numa_ids: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    """One row of integer distances per NUMA node, as long as there are nodes, in NUMA id order."""
    rows: dict[int, tuple[int, ...]] = {}
    for nid, row in distances.items():
        if nid not in numa_ids:
            raise TopologyError(f"distances given for NUMA node {nid}, which is not in the topology")
        values = tuple(row)
        if len(values) != len(numa_ids):
            raise TopologyError(
                f"distance row of NUMA node {nid} has {len(values)} values; expected {len(numa_ids)}")
        for v in values:
            _int(v, f"distance from NUMA node {nid}")
        rows[nid] = values
    missing = [nid for nid in numa_ids if nid not in rows]
    if missing:
        raise TopologyError(f"distances are missing for NUMA nodes {missing}")
    return {nid: rows[nid] for nid in numa_ids}


def _checked_devices(devices: Iterable[Device], numa_index: Mapping[int, int]) -> tuple[Device, ...]:
    """The devices, each named, listed once and on NUMA nodes of the topology."""
    dev_list = tuple(devices)
    seen: set[tuple[str, str]] = set()
    for d in dev_list:
        if not d.id or not d.resource:
            raise TopologyError(f"device {d.id!r} needs an id and a resource name")
        if (d.resource, d.id) in seen:
            raise TopologyError(f"device {d.id!r} of {d.resource} is listed twice")
        seen.add((d.resource, d.id))
        for nid in d.numa or ():
            if nid not in numa_index:
                raise TopologyError(f"device {d.id!r} is on NUMA node {nid}, which is not in the topology")
    return dev_list
