"""hwloc XML (lstopo `.xml`), versions 1.x (no `version` attribute), 2.0 and 3.0.

Rules followed (from hwloc's XML format, not from particular files):
- v1: NUMANode is an ordinary tree parent (it can even be the root object); generic `Cache`
  objects carry `depth`; `Socket` is the old name of `Package`.
- v2/v3: NUMANodes are memory children listed before the normal children; a PU's NUMA node is
  the memory child of its nearest ancestor that has memory children and whose cpuset holds the
  PU (DRAM preferred over subtype MCDRAM/GPUMemory/..., then the lowest os index); otherwise any
  NUMANode whose cpuset holds it; otherwise the PU's own `nodeset`.
- A PU left without any NUMA node (cgroup-restricted exports, or v1 files without NUMA objects)
  goes to the node named by its nearest ancestor's `complete_nodeset` (else node 0); such nodes
  are created with no memory and `numa_nodes` is flagged in `inferred`.
- cpusets are 32-bit hex words, most significant first, empty word = 0.
- Offline/disallowed CPUs: root `complete_cpuset` minus the PUs present → `offline_cpus`.
- Cores: the Core object (a PU without one is its own core); socket: the Package/Socket
  `os_index` (its logical index when absent); uncore: logical index of the L3 cache above the PU.
- Distances: v2/v3 `distances2` of type NUMANode (prefer name NUMALatency, then latency kind),
  `indexing` os or gp, ids over several `indexes` and values over several `u64values`
  (hwloc writes ten per element); v1 `distances` whose objects at
  `relative_depth` below the holder are all the NUMA nodes, in tree order, scaled by
  `latency_base`.
- Devices: one physical device shows up in hwloc as several OS devices (a GPU as cuda0, nvml0,
  opencl0d0 and card0; an RDMA NIC as eth2, ib0 and mlx4_0), so the engine gets one `Device` per
  PCI function (PCIDev) that has at least one OSDev of kind gpu, coproc, network or openfabrics
  below it (v1/v2 `osdev_type` enum; v3 bitmask). Its id is the PCI bus id, its name a label from
  the PCIVendor/PCIDevice infos (else the OSDev's GPUVendor/GPUModel, else the vendor id) and the
  OSDev names, e.g. "NVIDIA Corporation Tesla P100-SXM2-16GB (cuda0, nvml0, opencl0d0)". SR-IOV
  functions without an OS device are not devices. Such an OSDev outside any PCIDev stays one
  `Device` on its own (id = its name, resource `hwloc/<kind>`).
- Device resource names are inferred (flagged `device_resources` in `inferred`) from the class and
  vendor in `pci_type` ("CCSS [VVVV:DDDD] [SSSS:ssss] rr", v3 adds a byte): class 03xx (display)
  and 12xx (processing accelerator): vendor 10de → `nvidia.com/gpu`, 1002 → `amd.com/gpu`, 8086 →
  `gpu.intel.com/i915`, any other → `hwloc/gpu`; class 02xx (network, 0207 InfiniBand included)
  and 0c06 (InfiniBand on the serial-bus class): `hwloc/rdma` when an openfabrics OSDev is below,
  else `hwloc/nic`; anything else (or no readable `pci_type`): `hwloc/<kind>` of the most specific
  kind among its OSDevs (openfabrics, gpu, coproc, network, in that order).
- Device NUMA: the NUMA nodes of the nodeset (else cpuset) of the first non-I/O ancestor.
- Every OSDev of any kind is listed in `extra["os_devices"]`: name, kind (most specific), kinds (all
  v3 bits), subtype, pci_busid (of the PCIDev above it, else None), numa (list or None) and device
  (the id of the engine `Device` it belongs to, else None).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from ..errors import FormatError
from ..model.bitmask import bits_of as bits
from ..model.topology import Device
from ._draft import CPURecord, Draft
from ._values import hugepage_key, parse_hex_mask, parse_id, parse_int

FORMAT = "hwloc-xml"
IO_TYPES = {"Bridge", "PCIDev", "OSDev", "Misc"}
MEMORY_ONLY_SUBTYPES = {"MCDRAM", "GPUMemory", "HBM", "NVM", "SPM", "CXL-DRAM", "CXLMem"}
V2_OSDEV = {0: "block", 1: "gpu", 2: "network", 3: "openfabrics", 4: "dma", 5: "coproc"}
V3_OSDEV_BITS = ((32, "openfabrics"), (4, "gpu"), (8, "coproc"), (16, "network"), (1, "storage"),
                 (2, "memory"), (64, "dma"))
#: OSDev kinds that make a schedulable device, most specific first (hwloc v3's bit precedence).
DEVICE_KINDS = ("openfabrics", "gpu", "coproc", "network")
#: PCI vendor id → the resource name its GPU device plugin advertises.
GPU_VENDORS = {"10de": "nvidia.com/gpu", "1002": "amd.com/gpu", "8086": "gpu.intel.com/i915"}
#: Vendor names for labels when the file carries no PCIVendor info (v3 exports drop it).
VENDOR_NAMES = {"10de": "NVIDIA", "1002": "AMD", "8086": "Intel", "15b3": "Mellanox", "14e4": "Broadcom",
                "1137": "Cisco", "1077": "QLogic", "1014": "IBM", "1022": "AMD", "19e5": "Huawei"}
PCI_TYPE = re.compile(r"\s*([0-9A-Fa-f]{4})?\s*(?:\[\s*([0-9A-Fa-f]{4})\s*:\s*([0-9A-Fa-f]{4})\s*\])?")
#: Most objects one file may hold.
MAX_OBJECTS = 2_000_000

Element = ET.Element
#: The NUMA nodes of each memory-holding ancestor of an object, outermost first (v2/v3).
MemStack = tuple[list[Element], ...]
#: A tree walk's step: the object, its package id, Core element, L3 index, v1 NUMA id, memory-children stack,
#: depth, locality anchor (nearest non-I/O object) and the nearest PCIDev above an OSDev.
_Frame = tuple[Element, int | None, Element | None, int | None, int | None, MemStack, int, Element, Element | None]


@dataclass
class _NUMAInfo:
    """A NUMANode object as read: memory, hugepages, its cpuset and whether it is a memory-only kind."""

    memory: int
    hugepages: dict[str, int]
    cpuset: int
    memory_only: bool


@dataclass
class _PU:
    """A PU object with what its ancestors said about it."""

    cpu: int
    core: Element | None
    package: int | None
    l3: int | None
    v1numa: int | None
    memstack: MemStack
    el: Element


@dataclass
class _Walk:
    """Everything one pass over the object tree collects."""

    pus: list[_PU] = field(default_factory=list)
    numa_info: dict[int, _NUMAInfo] = field(default_factory=dict)
    gp_to_numa: dict[str, int] = field(default_factory=dict)
    packages: list[int] = field(default_factory=list)
    osdevs: list[tuple[Element, Element, Element | None]] = field(default_factory=list)
    v1_distances: list[tuple[Element, int]] = field(default_factory=list)
    depth_objects: dict[int, list[Element]] = field(default_factory=dict)


def parse_xml(text: str) -> Element:
    """Parse with defusedxml (no entity expansion, no external entities or DTD fetching)."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        root: Element = fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise FormatError(f"hwloc XML refused: {exc} (entity declarations and external references are "
                          "not accepted)") from None
    except ET.ParseError as exc:
        line, col = getattr(exc, "position", (0, 0))
        raise FormatError(f"hwloc XML is not well-formed at line {line}, column {col + 1}: "
                          f"{str(exc).split(':')[0]}") from None
    except RecursionError:
        raise FormatError("hwloc XML nested too deeply") from None
    return root


def _type(el: Element) -> str:
    t = el.get("type", "")
    if t == "Socket":
        return "Package"
    if t == "Cache":
        depth = el.get("depth", "")
        return f"L{depth}Cache" if depth.isdigit() else "Cache"
    if t == "Node":
        return "NUMANode"
    return t


def _where(el: Element, index: int) -> str:
    attrs = " ".join(f'{k}="{el.get(k)}"' for k in ("type", "os_index", "name") if el.get(k) is not None)
    return f"<object {attrs}> (object #{index})"


def load(text: str, what: str = FORMAT) -> Draft:
    root, major, top = _root(text)
    walk = _walk(top, major)
    if not walk.pus:
        raise FormatError("hwloc XML: no PU objects (no CPUs) in the topology")
    draft = Draft()
    _place_pus(walk, top, major, draft)
    for nid, info in walk.numa_info.items():
        draft.numa_memory[nid] = info.memory
        if info.hugepages:
            draft.numa_hugepages[nid] = info.hugepages
    draft.extra["packages"] = sorted(set(walk.packages))
    empty = sorted(set(walk.packages) - {r.socket for r in draft.cpus})
    if empty:
        draft.notes.append(f"packages {empty} have no CPUs left in this (restricted) export")
    if not walk.numa_info:
        draft.notes.append("no NUMANode objects: every CPU placed on NUMA node 0")
    complete = top.get("complete_cpuset")
    if complete:
        present = 0
        for pu in walk.pus:
            present |= 1 << pu.cpu
        draft.offline = parse_hex_mask(complete, "hwloc XML: complete_cpuset of the root object") & ~present
    draft.distances = _distances_v2(root, walk.numa_info, walk.gp_to_numa) if major >= 2 else \
        _distances_v1(walk.v1_distances, walk.depth_objects)
    draft.devices, draft.extra["os_devices"] = _devices(walk.osdevs, major, walk.numa_info)
    if draft.devices:
        draft.inferred.add("device_resources")
    draft.description = _description(root, top)
    return draft


def _root(text: str) -> tuple[Element, int, Element]:
    """The <topology> element, the format's major version (1 when unstated) and the one root object."""
    root = parse_xml(text)
    if root.tag != "topology":
        raise FormatError(f"hwloc XML: the root element is <{root.tag}>, expected <topology>")
    version_text = root.get("version")
    major = 1
    if version_text:
        try:
            major = int(float(version_text))
        except ValueError:
            raise FormatError(f"hwloc XML: unknown version attribute {version_text!r}") from None
    tops = [c for c in root if c.tag == "object"]
    if len(tops) != 1:
        raise FormatError(f"hwloc XML: <topology> must hold exactly one root <object>, found {len(tops)}")
    return root, major, tops[0]


def _walk(top: Element, major: int) -> _Walk:
    """One depth-first pass in document order (an explicit stack: a deep file cannot overflow Python's),
    each object seeing what its ancestors said: package, core, L3, NUMA node, memory children."""
    walk = _Walk()
    depth_objects, v1_distances = walk.depth_objects, walk.v1_distances
    l3_count = pkg_count = counter = 0
    stack: list[_Frame] = [(top, None, None, None, None, (), 0, top, None)]
    while stack:
        el, pkg, core, l3, v1numa, memstack, depth, anchor, pcidev = stack.pop()
        counter += 1
        if counter > MAX_OBJECTS:
            raise FormatError("hwloc XML: more than 2,000,000 objects")
        t = _type(el)
        if not t:
            raise FormatError(f"hwloc XML: {_where(el, counter)} has no type")
        if t not in IO_TYPES:
            depth_objects.setdefault(depth, []).append(el)
            anchor = el
        if t == "PCIDev":
            pcidev = el
        elif t not in ("OSDev", "Misc"):
            pcidev = None
        if t == "Package":
            pkg_os = el.get("os_index")
            pkg = parse_id(pkg_os, "socket", f"hwloc XML: os_index of {_where(el, counter)}") if pkg_os is not None \
                else pkg_count
            pkg_count += 1
            walk.packages.append(pkg)
        elif t == "Core":
            core = el
        elif t == "L3Cache":
            l3 = l3_count
            l3_count += 1
        elif t == "NUMANode":
            nid = _numa_node(el, counter, walk.numa_info, walk.gp_to_numa)
            if major < 2:
                v1numa = nid
        elif t == "PU":
            os_index = el.get("os_index")
            if os_index is None:
                raise FormatError(f"hwloc XML: {_where(el, counter)} has no os_index")
            cpu = parse_id(os_index, "CPU", f"hwloc XML: os_index of {_where(el, counter)}")
            walk.pus.append(_PU(cpu, core, pkg, l3, v1numa, memstack, el))
        elif t == "OSDev":
            walk.osdevs.append((el, anchor, pcidev))
        children = [c for c in el if c.tag == "object"]
        mem_children = [c for c in children if _type(c) in ("NUMANode", "MemCache")] if major >= 2 else None
        child_memstack = _memstack(mem_children, memstack) if mem_children else memstack
        for c in el:
            if c.tag == "distances":
                v1_distances.append((c, depth))
        for c in reversed(children):
            stack.append((c, pkg, core, l3, v1numa, child_memstack, depth + 1, anchor, pcidev))
    return walk


def _memstack(mem_children: list[Element], memstack: MemStack) -> MemStack:
    """v2/v3: `memstack` with the NUMA nodes among an object's memory children (under MemCaches
    too) pushed, when it has any."""
    numas = []
    todo = list(mem_children)
    while todo:
        m = todo.pop()
        if _type(m) == "NUMANode":
            numas.append(m)
        todo.extend(c for c in m if c.tag == "object" and _type(c) in ("NUMANode", "MemCache"))
    return (*memstack, numas) if numas else memstack


def _place_pus(walk: _Walk, top: Element, major: int, draft: Draft) -> None:
    """Each PU as a CPU record: its NUMA node by the rules of the module docstring (v1 parent, local
    memory child, a node whose cpuset holds it, its own nodeset, else inferred) and its socket."""
    numa_info = walk.numa_info
    numa_masks = {nid: info.cpuset for nid, info in numa_info.items()}
    for pu in walk.pus:
        cpu, el = pu.cpu, pu.el
        numa = pu.v1numa
        if numa is None and major >= 2:
            numa = _local_numa(cpu, pu.memstack, numa_info)
        if numa is None:
            holders = [n for n in sorted(numa_masks) if numa_masks[n] >> cpu & 1]
            holders.sort(key=lambda n: (numa_info[n].memory_only, n))
            numa = holders[0] if holders else None
        nodeset = el.get("nodeset")
        if numa is None and nodeset:
            ns = bits(parse_hex_mask(nodeset, f"hwloc XML: nodeset of PU {cpu}"))
            known = [n for n in ns if n in numa_info]
            numa = known[0] if known else None
        if numa is None:
            numa = _orphan_numa(el, top)
            draft.inferred.add("numa_nodes")
        if pu.package is None:
            draft.inferred.add("sockets")
        core_key = ("core", id(pu.core)) if pu.core is not None else ("pu", cpu)
        draft.cpus.append(CPURecord(cpu, core_key, pu.package if pu.package is not None else 0, numa, pu.l3))


def _numa_node(el: Element, counter: int, numa_info: dict[int, _NUMAInfo], gp_to_numa: dict[str, int]) -> int:
    os_index = el.get("os_index")
    if os_index is None:
        raise FormatError(f"hwloc XML: {_where(el, counter)} has no os_index")
    nid = parse_id(os_index, "NUMA node", f"hwloc XML: os_index of {_where(el, counter)}")
    if nid in numa_info:
        raise FormatError(f"hwloc XML: NUMA node {nid} is listed twice ({_where(el, counter)})")
    memory = parse_int(el.get("local_memory", "0"), f"hwloc XML: local_memory of {_where(el, counter)}")
    pages: list[tuple[int, int]] = []
    for p in el:
        if p.tag == "page_type":
            size = parse_int(p.get("size", "0"), f"hwloc XML: page_type size in NUMA node {nid}")
            count = parse_int(p.get("count", "0"), f"hwloc XML: page_type count in NUMA node {nid}")
            pages.append((size, count))
    hugepages: dict[str, int] = {}
    if pages:
        base = min(size for size, _ in pages)
        for size, count in pages:
            if size > base and size:
                hugepages[hugepage_key(size)] = size * count
    cpuset = parse_hex_mask(el.get("cpuset", ""), f"hwloc XML: cpuset of NUMA node {nid}")
    subtype = el.get("subtype", "")
    numa_info[nid] = _NUMAInfo(memory, hugepages, cpuset, subtype in MEMORY_ONLY_SUBTYPES)
    gp_index = el.get("gp_index")
    if gp_index is not None:
        gp_to_numa[gp_index] = nid
    return nid


def _local_numa(cpu: int, memstack: MemStack, numa_info: dict[int, _NUMAInfo]) -> int | None:
    for numas in reversed(memstack):
        ids = [_numa_id(m) for m in numas]
        holding = [n for n in ids if numa_info[n].cpuset >> cpu & 1]
        if holding:
            holding.sort(key=lambda n: (numa_info[n].memory_only, n))
            return holding[0]
    return None


def _numa_id(numa: Element) -> int:
    """The os_index of a NUMANode `_numa_node` has read (and so checked)."""
    return int(numa.get("os_index", ""))


def _orphan_numa(pu: Element, top: Element) -> int:
    """NUMA node of a PU whose node is not in the file: its own complete_nodeset, else 0."""
    for attr in ("complete_nodeset", "nodeset"):
        value = pu.get(attr)
        if value:
            ids = bits(parse_hex_mask(value, f"hwloc XML: {attr} of a PU"))
            if ids:
                return ids[0]
    return 0


def _values(el: Element, what: str) -> list[int]:
    out = []
    for part in el:
        if part.tag == "u64values":
            for tok in (part.text or "").split():
                out.append(parse_int(tok, what))
    return out


def _distances_v2(root: Element, numa_info: dict[int, _NUMAInfo],
                  gp_to_numa: dict[str, int]) -> dict[int, dict[int, int]] | None:
    candidates: list[tuple[int, int, Element]] = []
    for el in root:
        if el.tag != "distances2" or el.get("type") != "NUMANode":
            continue
        kind = parse_int(el.get("kind", "0"), "hwloc XML: distances2 kind")
        name = el.get("name") or ""
        rank = 0 if name == "NUMALatency" else (1 if kind & 4 else 2)
        candidates.append((rank, len(candidates), el))
    if not candidates:
        return None
    el = min(candidates, key=lambda c: c[:2])[2]
    n = parse_int(el.get("nbobjs", "0"), "hwloc XML: distances2 nbobjs", 1)
    if n > 4096:
        raise FormatError(f"hwloc XML: distances2 nbobjs={n} is too large")
    indexing = el.get("indexing", "os")
    idx_els = [c for c in el if c.tag == "indexes"]
    if not idx_els:
        raise FormatError("hwloc XML: <distances2> without <indexes>")
    # hwloc writes ten ids per <indexes> element (as it does ten values per <u64values>)
    raw_ids = [tok for c in idx_els for tok in (c.text or "").split()]
    if len(raw_ids) != n:
        raise FormatError(f"hwloc XML: <distances2> lists {len(raw_ids)} indexes for nbobjs={n}")
    ids = []
    for tok in raw_ids:
        if indexing == "gp":
            if tok not in gp_to_numa:
                raise FormatError(f"hwloc XML: <distances2> names gp_index {tok}, which is no NUMA node")
            ids.append(gp_to_numa[tok])
        else:
            ids.append(parse_int(tok, "hwloc XML: <distances2> index"))
    values = _values(el, "hwloc XML: <distances2> value")
    if len(values) != n * n:
        raise FormatError(f"hwloc XML: <distances2> has {len(values)} values for {n}x{n} objects")
    return {a: {b: values[i * n + j] for j, b in enumerate(ids)} for i, a in enumerate(ids)}


def _distances_v1(blocks: list[tuple[Element, int]],
                  depth_objects: dict[int, list[Element]]) -> dict[int, dict[int, int]] | None:
    total_numa = len([o for objs in depth_objects.values() for o in objs if _type(o) == "NUMANode"])
    for el, holder_depth in blocks:
        rel = parse_int(el.get("relative_depth", "0"), "hwloc XML: distances relative_depth")
        objs = depth_objects.get(holder_depth + rel, [])
        n = parse_int(el.get("nbobjs", "0"), "hwloc XML: distances nbobjs", 1)
        if not objs or any(_type(o) != "NUMANode" for o in objs) or len(objs) != n or n != total_numa:
            continue
        try:
            base = float(el.get("latency_base", "1"))
            lat = [float(c.get("value", "nan")) for c in el if c.tag == "latency"]
        except ValueError:
            raise FormatError("hwloc XML: <distances> latency values must be numbers") from None
        if len(lat) != n * n or any(v != v or v < 0 or v > 1e9 for v in lat):
            raise FormatError(f"hwloc XML: <distances> has {len(lat)} valid latencies for {n}x{n} objects")
        ids = [_numa_id(o) for o in objs]
        return {a: {b: round(lat[i * n + j] * base) for j, b in enumerate(ids)} for i, a in enumerate(ids)}
    return None


def _osdev_kinds(el: Element, major: int) -> list[str]:
    """All kinds an OSDev declares, most specific first (v1/v2: one enum value; v3: a bitmask)."""
    raw = el.get("osdev_type")
    if raw is None:
        return []
    value = parse_int(raw, f"hwloc XML: osdev_type of OSDev {el.get('name')!r}")
    if major >= 3:
        return [kind for bit, kind in V3_OSDEV_BITS if value & bit]
    return [V2_OSDEV[value]] if value in V2_OSDEV else []


def _locality(anchor: Element, numa_info: dict[int, _NUMAInfo], cache: dict[int, tuple[int, ...] | None],
              name: str) -> tuple[int, ...] | None:
    """NUMA nodes of an I/O object: the nodeset (else the cpuset) of its first non-I/O ancestor."""
    key = id(anchor)
    if key in cache:
        return cache[key]
    numa: tuple[int, ...] | None = None
    nodeset, cpuset = anchor.get("nodeset"), anchor.get("cpuset")
    if nodeset is not None and numa_info:
        numa = tuple(n for n in bits(parse_hex_mask(nodeset, f"hwloc XML: nodeset above {name}"))
                     if n in numa_info) or None
    elif cpuset and numa_info:
        cpus = parse_hex_mask(cpuset, f"hwloc XML: cpuset above {name}")
        numa = tuple(sorted(n for n, info in numa_info.items() if info.cpuset & cpus)) or None
    cache[key] = numa
    return numa


def parse_pci_type(text: str | None) -> tuple[int | None, str | None, str | None]:
    """(class, vendor, device) from `pci_type` ("CCSS [VVVV:DDDD] [SSSS:ssss] rr", v3 adds a byte);
    parts that cannot be read are None."""
    match = PCI_TYPE.match(text or "")
    if not match:
        return None, None, None
    cls, vendor, device = match.groups()
    return (int(cls, 16) if cls else None), (vendor.lower() if vendor else None), (device.lower() if device else None)


def device_resource(pci_class: int | None, vendor: str | None, kinds: set[str]) -> str:
    """Device-plugin resource name of one PCI function (the rule in the module docstring)."""
    base = None if pci_class is None else pci_class >> 8
    if base in (0x03, 0x12):
        return GPU_VENDORS.get(vendor or "", "hwloc/gpu")
    if base == 0x02 or pci_class == 0x0C06:
        return "hwloc/rdma" if "openfabrics" in kinds else "hwloc/nic"
    return f"hwloc/{next(k for k in DEVICE_KINDS if k in kinds)}"


def _infos(el: Element) -> dict[str, str]:
    infos: dict[str, str] = {}
    for c in el:
        name = c.get("name") if c.tag == "info" else None
        if name:
            infos[name] = c.get("value", "")
    return infos


def _label(pcidev: Element, vendor: str | None, device: str | None, members: list[Element]) -> str:
    infos = _infos(pcidev)
    for el in members:
        for k, v in _infos(el).items():
            infos.setdefault(k, v)
    who = (infos.get("PCIVendor") or infos.get("GPUVendor") or VENDOR_NAMES.get(vendor or "")
           or (f"vendor {vendor}" if vendor else "")).strip()
    what = (infos.get("PCIDevice") or infos.get("GPUModel") or (f"device {device}" if device else "")).strip()
    head = " ".join(p for p in (who, what) if p) or "PCI device"
    names = sorted(el.get("name") or "?" for el in members)
    return f"{head} ({', '.join(names)})"


#: One OSDev of a device group: the element, the PCIDev above it, its `os_devices` record, NUMA nodes and kinds.
_Member = tuple[Element, Element | None, dict[str, object], tuple[int, ...] | None, list[str]]


def _devices(osdevs: list[tuple[Element, Element, Element | None]], major: int,
             numa_info: dict[int, _NUMAInfo]) -> tuple[list[Device], list[dict[str, object]]]:
    """Engine devices (one per PCI function holding a gpu/coproc/network/openfabrics OSDev; one per
    such OSDev outside any PCIDev) and the per-OSDev list kept in `extra["os_devices"]`."""
    cache: dict[int, tuple[int, ...] | None] = {}
    records: list[dict[str, object]] = []
    groups: dict[int, list[_Member]] = {}
    for el, anchor, pcidev in osdevs:
        kinds = _osdev_kinds(el, major)
        name = el.get("name") or f"osdev{len(records)}"
        numa = _locality(anchor, numa_info, cache, name)
        rec: dict[str, object] = {
            "name": name, "kind": kinds[0] if kinds else None, "kinds": kinds, "subtype": el.get("subtype"),
            "pci_busid": pcidev.get("pci_busid") if pcidev is not None else None,
            "numa": list(numa) if numa is not None else None, "device": None}
        records.append(rec)
        if kinds and kinds[0] in DEVICE_KINDS:
            key = id(pcidev) if pcidev is not None else id(el)
            groups.setdefault(key, []).append((el, pcidev, rec, numa, kinds))
    out = []
    ids: set[str] = set()
    for members in groups.values():
        el, pcidev, rec, numa, kinds = members[0]
        if pcidev is not None:
            pci_class, vendor, device = parse_pci_type(pcidev.get("pci_type"))
            resource = device_resource(pci_class, vendor, {k for m in members for k in m[4]})
            base_id = pcidev.get("pci_busid") or str(rec["name"])
            label = _label(pcidev, vendor, device, [m[0] for m in members])
        else:
            resource, base_id, label = f"hwloc/{kinds[0]}", str(rec["name"]), str(rec["name"])
        dev_id = base_id
        n = 1
        while dev_id in ids:
            n += 1
            dev_id = f"{base_id}#{n}"
        ids.add(dev_id)
        for m in members:
            m[2]["device"] = dev_id
        out.append(Device(dev_id, resource, numa, True, label))
    return out, records


def _description(root: Element, top: Element) -> str:
    infos: dict[str, str] = {}
    for holder in (root, top):
        for c in holder:
            name = c.get("name") if c.tag == "info" else None
            if name:
                infos.setdefault(name, c.get("value", ""))
    parts = [infos.get(k, "").strip() for k in ("DMIProductName", "CPUModel", "Architecture")]
    return "hwloc XML" + (": " + ", ".join(p for p in parts if p) if any(parts) else "")
