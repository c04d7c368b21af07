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
- Distances: `hwloc_distances`; devices: `hwloc_devices`; the object vocabulary both share with the walk
  here: `hwloc_objects`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import FormatError
from ..model.bitmask import bits_of as bits
from ._draft import CPURecord, Draft
from ._values import hugepage_key, parse_hex_mask, parse_id, parse_int
from .hwloc_devices import read_devices
from .hwloc_distances import distances_v1, distances_v2
from .hwloc_objects import Element, NUMAInfo, numa_id, object_type, parse_xml, where

FORMAT = "hwloc-xml"
IO_TYPES = {"Bridge", "PCIDev", "OSDev", "Misc"}
MEMORY_ONLY_SUBTYPES = {"MCDRAM", "GPUMemory", "HBM", "NVM", "SPM", "CXL-DRAM", "CXLMem"}
#: Most objects one file may hold.
MAX_OBJECTS = 2_000_000

#: The NUMA nodes of each memory-holding ancestor of an object, outermost first (v2/v3).
MemStack = tuple[list[Element], ...]
#: A tree walk's step: the object, its package id, Core element, L3 index, v1 NUMA id, memory-children stack,
#: depth, locality anchor (nearest non-I/O object) and the nearest PCIDev above an OSDev.
_Frame = tuple[Element, int | None, Element | None, int | None, int | None, MemStack, int, Element, Element | None]


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
    numa_info: dict[int, NUMAInfo] = field(default_factory=dict)
    gp_to_numa: dict[str, int] = field(default_factory=dict)
    packages: list[int] = field(default_factory=list)
    osdevs: list[tuple[Element, Element, Element | None]] = field(default_factory=list)
    v1_distances: list[tuple[Element, int]] = field(default_factory=list)
    depth_objects: dict[int, list[Element]] = field(default_factory=dict)


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
    draft.distances = distances_v2(root, walk.gp_to_numa) if major >= 2 else \
        distances_v1(walk.v1_distances, walk.depth_objects)
    draft.devices, draft.extra["os_devices"] = read_devices(walk.osdevs, major, walk.numa_info)
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
        t = object_type(el)
        if not t:
            raise FormatError(f"hwloc XML: {where(el, counter)} has no type")
        if t not in IO_TYPES:
            depth_objects.setdefault(depth, []).append(el)
            anchor = el
        if t == "PCIDev":
            pcidev = el
        elif t not in ("OSDev", "Misc"):
            pcidev = None
        if t == "Package":
            pkg_os = el.get("os_index")
            pkg = parse_id(pkg_os, "socket", f"hwloc XML: os_index of {where(el, counter)}") if pkg_os is not None \
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
                raise FormatError(f"hwloc XML: {where(el, counter)} has no os_index")
            cpu = parse_id(os_index, "CPU", f"hwloc XML: os_index of {where(el, counter)}")
            walk.pus.append(_PU(cpu, core, pkg, l3, v1numa, memstack, el))
        elif t == "OSDev":
            walk.osdevs.append((el, anchor, pcidev))
        children = [c for c in el if c.tag == "object"]
        mem_children = [c for c in children if object_type(c) in ("NUMANode", "MemCache")] if major >= 2 else None
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
        if object_type(m) == "NUMANode":
            numas.append(m)
        todo.extend(c for c in m if c.tag == "object" and object_type(c) in ("NUMANode", "MemCache"))
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


def _numa_node(el: Element, counter: int, numa_info: dict[int, NUMAInfo], gp_to_numa: dict[str, int]) -> int:
    os_index = el.get("os_index")
    if os_index is None:
        raise FormatError(f"hwloc XML: {where(el, counter)} has no os_index")
    nid = parse_id(os_index, "NUMA node", f"hwloc XML: os_index of {where(el, counter)}")
    if nid in numa_info:
        raise FormatError(f"hwloc XML: NUMA node {nid} is listed twice ({where(el, counter)})")
    memory = parse_int(el.get("local_memory", "0"), f"hwloc XML: local_memory of {where(el, counter)}")
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
    numa_info[nid] = NUMAInfo(memory, hugepages, cpuset, subtype in MEMORY_ONLY_SUBTYPES)
    gp_index = el.get("gp_index")
    if gp_index is not None:
        gp_to_numa[gp_index] = nid
    return nid


def _local_numa(cpu: int, memstack: MemStack, numa_info: dict[int, NUMAInfo]) -> int | None:
    for numas in reversed(memstack):
        ids = [numa_id(m) for m in numas]
        holding = [n for n in ids if numa_info[n].cpuset >> cpu & 1]
        if holding:
            holding.sort(key=lambda n: (numa_info[n].memory_only, n))
            return holding[0]
    return None


def _orphan_numa(pu: Element, top: Element) -> int:
    """NUMA node of a PU whose node is not in the file: its own complete_nodeset, else 0."""
    for attr in ("complete_nodeset", "nodeset"):
        value = pu.get(attr)
        if value:
            ids = bits(parse_hex_mask(value, f"hwloc XML: {attr} of a PU"))
            if ids:
                return ids[0]
    return 0


def _description(root: Element, top: Element) -> str:
    infos: dict[str, str] = {}
    for holder in (root, top):
        for c in holder:
            name = c.get("name") if c.tag == "info" else None
            if name:
                infos.setdefault(name, c.get("value", ""))
    parts = [infos.get(k, "").strip() for k in ("DMIProductName", "CPUModel", "Architecture")]
    return "hwloc XML" + (": " + ", ".join(p for p in parts if p) if any(parts) else "")
