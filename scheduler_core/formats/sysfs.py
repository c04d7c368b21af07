"""A Linux sysfs tree — a folder (a live `/` or an unpacked dump) or a tar / tar.gz / tar.bz2 / tar.xz
dump (hwloc-gather-topology's `<name>/sys/...`, util-linux's `<name>/sys/...`).

Only `sys/devices/system/{cpu,node}`, the PCI functions' `class`, `vendor`, `device` and `numa_node`
(`sys/bus/pci/devices/*`, in an archive `sys/devices/pci*/.../<bus id>/`), `proc/cpuinfo` and
`proc/meminfo` are read; archive members are capped in size and number, links are never followed
outside the tree, trailing NUL bytes are stripped.

Rules:
- Online CPUs: `cpu/online` when present, else every `cpuN` whose `online` is not 0 (old kernels);
  the other present/possible CPUs with a `cpuN` folder are `offline_cpus`.
- Two CPUs share a core only when they agree on package, drawer, book, die, cluster, core_id,
  NUMA node and thread siblings (`core_cpus_list`, `thread_siblings_list` or the `thread_siblings`
  map): `core_id` alone repeats across dies and clusters, and Bulldozer's thread siblings pair two
  integer cores that have different core ids; the siblings come from `core_cpus_list`, else the
  `core_cpus` map, else `thread_siblings_list`, else the `thread_siblings` map.
- Socket: a package is the set of CPUs its package mask (`package_cpus_list`, `package_cpus`,
  `core_siblings_list`, `core_siblings`) names, as hwloc reads it. Packages are numbered by
  `physical_package_id` when each id names one package; when an id repeats over different masks
  (16 one-CPU Itanium packages all saying 0 or 512) or is -1 (POWER, s390), by their lowest CPU, as
  lscpu does. Without any mask: `physical_package_id`, else 0 (flagged).
- NUMA: `nodeN/cpulist` (else `cpumap`), restricted to online CPUs; node ids may be sparse. An
  online CPU that no node folder lists goes to the node of its `cpuN/nodeM` link (a node folder
  missing from the dump, flagged `numa_nodes`), else node 0.
- Memory: `nodeN/meminfo` MemTotal; hugepages: `nodeN/hugepages/hugepages-<size>kB/nr_hugepages`.
  A kernel without NUMA folders (no `node/nodeN`) has one node, 0: its memory is `proc/meminfo`'s
  MemTotal and its hugepages `HugePages_Total` × `Hugepagesize`.
- PCI devices: `sysfs_pci` (which functions become devices, their NUMA node and resource).
- Distances: `nodeN/distance`; the columns are the node folders in id order, or `node/possible`
  (then `node/online`) when the row has that length instead.
- Uncore: the level-3 cache's `id`, else the lowest CPU of its `shared_cpu_list`.
"""

from __future__ import annotations

import os
import pathlib
import re
from dataclasses import dataclass, field

from ..errors import FormatError
from ..model.bitmask import bits_of as bits
from . import _tar
from ._draft import CPURecord, Draft, Loaded, build_topology
from ._source import Source
from ._values import check_id, hugepage_key, parse_cpulist, parse_hex_mask, parse_id, parse_int
from .sysfs_pci import PCI_FILE, pci_devices, pci_key, read_pci

#: Bounds on an archive (a 448-thread dump has ~35,000 members and ~31 MiB of tar stream; the limits
#: leave room for machines three times larger and refuse an archive bomb in well under a second).
MAX_MEMBERS = 100_000
MAX_MEMBER_BYTES = 1 << 20
MAX_TOTAL_BYTES = 16 << 20  # the wanted sysfs files together
MAX_TAR_BYTES = 64 << 20  # decompressed, every member counted (skipped ones too)
MAX_TAR_SECONDS = 5.0
_WANTED = re.compile(
    r"(?:^|/)(sys/devices/system/(?:cpu/(?:online|possible|present|"
    r"cpu\d+/(?:online|topology/[a-z_]+|cache/index\d+/(?:level|id|shared_cpu_list|shared_cpu_map|type)))|"
    r"node/(?:online|possible|has_cpu|has_memory|node\d+/(?:cpulist|cpumap|distance|meminfo|"
    r"hugepages/hugepages-\d+kB/nr_hugepages)))|proc/cpuinfo)$")
_CPU_FILE = re.compile(r"sys/devices/system/cpu/cpu(\d+)/(.*)$")
_NODE_FILE = re.compile(r"sys/devices/system/node/node(\d+)/(.*)$")
_HUGEPAGES = re.compile(r"hugepages/hugepages-(\d+)kB/nr_hugepages$")
_CPU_NODE_LINK = re.compile(r"(?:^|/)sys/devices/system/cpu/cpu(\d+)/node(\d+)$")
_PROC_FILES = ("proc/cpuinfo", "proc/meminfo")


def _proc_file(member: str) -> str | None:
    return next((f for f in _PROC_FILES if member == f or member.endswith("/" + f)), None)


def _wanted(member: str) -> bool:
    """Members whose content the importer reads (every other payload is skipped unread)."""
    if _proc_file(member) is not None or PCI_FILE.search(member) is not None:
        return True
    at = member.find("sys/devices/system/")
    return at >= 0 and (at == 0 or member[at - 1] == "/") and _WANTED.fullmatch(member[at:]) is not None


def _read_tar(raw: bytes, name: str) -> tuple[dict[str, str], dict[int, int]]:
    files: dict[str, str] = {}
    links: dict[int, int] = {}
    total = 0
    for member, kind, payload in _tar.members(raw, name, _wanted, max_members=MAX_MEMBERS, max_bytes=MAX_TAR_BYTES,
                                              max_member_bytes=MAX_MEMBER_BYTES, seconds=MAX_TAR_SECONDS):
        if kind == "link":
            link = _CPU_NODE_LINK.search(member)
            if link:
                links[check_id(int(link.group(1)), "CPU", f"{name}: {member}")] = check_id(
                    int(link.group(2)), "NUMA node", f"{name}: {member}")
            continue
        proc = _proc_file(member)
        if proc is not None:
            files[proc] = _text(payload, name, member)
            continue
        total += len(payload)
        if total > MAX_TOTAL_BYTES:
            raise FormatError(f"{name}: the sysfs files add up to more than {MAX_TOTAL_BYTES} bytes")
        pci = PCI_FILE.search(member)
        key = pci_key(pci.group(1), pci.group(2)) if pci else member[member.find("sys/devices/system/"):]
        files[key] = _text(payload, name, member)
    return files, links


def _text(payload: bytes, name: str, member: str) -> str:
    if len(payload) > MAX_MEMBER_BYTES:
        raise FormatError(f"{name}: archive member {member} is larger than {MAX_MEMBER_BYTES} bytes")
    return payload.decode("utf-8", "replace")


def _read_dir(root: pathlib.Path) -> tuple[dict[str, str], dict[int, int]]:
    base = root
    if not (root / "sys").is_dir():
        subs = [p for p in root.iterdir() if (p / "sys" / "devices" / "system").is_dir()]
        if len(subs) == 1:
            base = subs[0]
    return read_roots(base / "sys", base / "proc", str(root))


def read_roots(sys_dir: pathlib.Path, proc_dir: pathlib.Path, name: str) -> tuple[dict[str, str], dict[int, int]]:
    """The wanted files of a sysfs folder (a live `/sys`, or a dump's `sys/`) and a proc folder, keyed as
    in an archive (`sys/devices/system/...`, `pci/<bus id>/<file>`, `proc/...`), and the CPUs' node links."""
    files: dict[str, str] = {}
    links: dict[int, int] = {}
    total = 0
    for sub in ("devices/system/cpu", "devices/system/node"):
        top = sys_dir / sub
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            rel_dir = "sys/" + pathlib.Path(dirpath).relative_to(sys_dir).as_posix()
            if rel_dir.count("/") > 8:
                dirnames[:] = []
                continue
            for entry in list(dirnames) + filenames:
                rel = f"{rel_dir}/{entry}"
                link = _CPU_NODE_LINK.search(rel)
                if link:
                    links[check_id(int(link.group(1)), "CPU", rel)] = check_id(int(link.group(2)), "NUMA node", rel)
            for fname in filenames:
                rel = f"{rel_dir}/{fname}"
                if not _WANTED.search(rel):
                    continue
                try:
                    with open(os.path.join(dirpath, fname), "rb") as fh:
                        data = fh.read(MAX_MEMBER_BYTES)
                except OSError:
                    continue
                total += len(data)
                if total > MAX_TOTAL_BYTES:
                    raise FormatError(f"{name}: the sysfs files add up to more than {MAX_TOTAL_BYTES} bytes")
                files[rel] = data.decode("utf-8", "replace")
    files.update(read_pci(sys_dir, MAX_MEMBERS, MAX_MEMBER_BYTES))
    for proc in _PROC_FILES:
        path = proc_dir / proc.split("/", 1)[1]
        if path.is_file():
            with path.open("rb") as fh:
                files[proc] = fh.read(MAX_MEMBER_BYTES).decode("utf-8", "replace")
    return files, links


def _clean(text: str) -> str:
    return text.replace("\x00", "").strip()


CPU_DIR = "sys/devices/system/cpu"


@dataclass
class _Tree:
    """The files of a sysfs tree that matter, by CPU and NUMA node: each CPU's `topology/` files, its
    `cache/indexN/` files and its `online` flag; each node's files."""

    topology: dict[int, dict[str, str]] = field(default_factory=dict)
    cache: dict[int, dict[str, dict[str, str]]] = field(default_factory=dict)
    cpu_online: dict[int, str] = field(default_factory=dict)
    nodes: dict[int, dict[str, str]] = field(default_factory=dict)


def load(src: Source, proc_dir: pathlib.Path | None = None) -> Draft:
    """A draft from a dump (folder or archive), or with `proc_dir` from a sysfs folder itself (`src`)
    and a proc folder, as a live machine has them."""
    if src.directory is not None and proc_dir is not None:
        files, links = read_roots(src.directory, proc_dir, src.name)
    elif src.directory is not None:
        files, links = _read_dir(src.directory)
    elif src.raw is not None:
        files, links = _read_tar(src.raw, src.name)
    else:
        raise FormatError(f"{src.name}: a sysfs tree must be a folder or an archive")
    tree = _tree(files, src.name)
    if not tree.topology and not tree.cpu_online and f"{CPU_DIR}/online" not in files:
        raise FormatError(f"{src.name}: no sys/devices/system/cpu information found")
    draft = Draft(description=f"sysfs: {_model(files.get('proc/cpuinfo', ''))}".rstrip(": "))
    online = _online(tree, files, src.name, draft)
    numa_of = _numa(tree.nodes, online, src.name, draft)
    for cpu in sorted(online):
        if cpu not in numa_of:
            numa_of[cpu] = links.get(cpu, 0)
            draft.inferred.add("numa_nodes")
            draft.numa_memory.setdefault(numa_of[cpu], 0)
    if not tree.nodes and set(numa_of.values()) == {0}:
        _memory_from_proc(files.get("proc/meminfo", ""), f"{src.name}: proc/meminfo", draft)
    draft.distances = _distances(tree.nodes, files, src.name)
    package_of = _packages(tree.topology, online, src.name)
    for cpu in sorted(online):
        _add_cpu(cpu, tree, numa_of[cpu], package_of, src.name, draft)
    pci_devices(files, numa_of, src.name, draft)
    return draft


def load_host(sys_dir: pathlib.Path, proc_dir: pathlib.Path) -> Loaded:
    """This machine from its sysfs and proc folders (a node agent's `--sysfs` and `--proc`)."""
    draft = load(Source(directory=sys_dir, name=str(sys_dir)), proc_dir)
    topology = build_topology(draft, str(sys_dir))
    return Loaded("sysfs", topology, notes=draft.notes, dropped_numa=draft.dropped_numa, extra=draft.extra)


def _tree(files: dict[str, str], name: str) -> _Tree:
    """The CPU and node files among `files`, ids range-checked as they are read."""
    tree = _Tree()
    for path, text in files.items():
        value = _clean(text)
        m = _CPU_FILE.match(path)
        if m:
            cpu, rest = check_id(int(m.group(1)), "CPU", f"{name}: {path}"), m.group(2)
            if rest == "online":
                tree.cpu_online[cpu] = value
            elif rest.startswith("topology/"):
                tree.topology.setdefault(cpu, {})[rest[9:]] = value
            elif rest.startswith("cache/"):
                _, index, fname = rest.split("/")
                tree.cache.setdefault(cpu, {}).setdefault(index, {})[fname] = value
            continue
        m = _NODE_FILE.match(path)
        if m:
            tree.nodes.setdefault(check_id(int(m.group(1)), "NUMA node", f"{name}: {path}"), {})[m.group(2)] = text
    return tree


def _online(tree: _Tree, files: dict[str, str], name: str, draft: Draft) -> set[int]:
    """The online CPUs (`cpu/online`, else each CPU's `online` flag); the known or present others
    go to `draft.offline`."""
    known_cpus = set(tree.topology) | set(tree.cpu_online)
    if f"{CPU_DIR}/online" in files:
        online = set(parse_cpulist(_clean(files[f"{CPU_DIR}/online"]), f"{name}: cpu/online"))
    else:
        online = {c for c in known_cpus if tree.cpu_online.get(c, "1") != "0"}
    offline = known_cpus - online
    if f"{CPU_DIR}/present" in files:
        offline |= set(parse_cpulist(_clean(files[f"{CPU_DIR}/present"]), f"{name}: cpu/present")) - online
    draft.offline = sum(1 << c for c in offline)
    if not online:
        raise FormatError(f"{name}: no online CPU")
    return online


def _numa(nodes: dict[int, dict[str, str]], online: set[int], name: str, draft: Draft) -> dict[int, int]:
    """Each node's memory and hugepages into the draft; returns the node of each online CPU its
    `cpulist` (else `cpumap`) names, the lowest node first."""
    numa_of: dict[int, int] = {}
    for nid in sorted(nodes):
        entry = nodes[nid]
        where = f"{name}: node{nid}"
        if "cpulist" in entry:
            mask = parse_cpulist(_clean(entry["cpulist"]), f"{where}/cpulist").mask
        elif "cpumap" in entry:
            mask = parse_hex_mask(entry["cpumap"], f"{where}/cpumap")
        else:
            mask = 0
        for cpu in bits(mask):
            if cpu in online:
                numa_of.setdefault(cpu, nid)
        draft.numa_memory[nid] = _memtotal(entry.get("meminfo", ""), f"{where}/meminfo")
        pages = {}
        for fname, text in entry.items():
            hm = _HUGEPAGES.match(fname)
            if hm:
                size = int(hm.group(1)) * 1024
                pages[hugepage_key(size)] = size * parse_int(_clean(text), f"{where}/{fname}")
        if pages:
            draft.numa_hugepages[nid] = pages
    return numa_of


def _add_cpu(cpu: int, tree: _Tree, numa: int, package_of: dict[int, int], name: str, draft: Draft) -> None:
    """One online CPU's record: its package (`_packages`, else 0 inferred), its core (every topology id
    and the thread siblings agree) and its L3."""
    t = tree.topology.get(cpu, {})
    where = f"{name}: cpu{cpu}/topology"
    pkg = package_of.get(cpu)
    if pkg is None:
        pkg = 0
        draft.inferred.add("sockets")
    siblings = None
    if "core_cpus_list" in t:
        siblings = parse_cpulist(t["core_cpus_list"], f"{where}/core_cpus_list").mask
    elif "core_cpus" in t:
        siblings = parse_hex_mask(t["core_cpus"], f"{where}/core_cpus")
    elif "thread_siblings_list" in t:
        siblings = parse_cpulist(t["thread_siblings_list"], f"{where}/thread_siblings_list").mask
    elif "thread_siblings" in t:
        siblings = parse_hex_mask(t["thread_siblings"], f"{where}/thread_siblings")
    key: tuple[object, ...]
    if not t:
        key = ("cpu", cpu)
        draft.inferred.add("cores")
    else:
        if t.get("core_id", "").strip().isdigit():
            parse_id(t["core_id"], "core", f"{where}/core_id")
        key = (pkg, t.get("drawer_id"), t.get("book_id"), t.get("die_id"), t.get("cluster_id"), t.get("core_id"),
               numa, siblings)
    draft.cpus.append(CPURecord(cpu, key, pkg, numa, _l3(tree.cache.get(cpu, {}), f"{name}: cpu{cpu}")))


def _packages(topo: dict[int, dict[str, str]], online: set[int], name: str) -> dict[int, int]:
    """Socket per CPU (the rule in the module docstring): packages are the package masks' CPU sets, named
    by `physical_package_id` when each id names one package, else numbered by their lowest CPU."""
    masks: dict[int, int] = {}
    ids: dict[int, int] = {}
    for cpu in sorted(online):
        t = topo.get(cpu, {})
        where = f"{name}: cpu{cpu}/topology"
        pkg_text = t.get("physical_package_id")
        if pkg_text is not None and pkg_text.strip() != "-1":
            ids[cpu] = parse_id(pkg_text, "socket", f"{where}/physical_package_id")
        for fname, parse in (("package_cpus_list", _list_mask), ("package_cpus", parse_hex_mask),
                             ("core_siblings_list", _list_mask), ("core_siblings", parse_hex_mask)):
            if fname in t:
                mask = parse(t[fname], f"{where}/{fname}")
                if mask:
                    masks[cpu] = mask
                break
    id_of_mask: dict[int, set[int]] = {}
    for cpu, mask in masks.items():
        id_of_mask.setdefault(mask, set()).add(ids.get(cpu, -1))
    named = [next(iter(i)) for i in id_of_mask.values() if len(i) == 1 and -1 not in i]
    if len(named) == len(id_of_mask) and len(set(named)) == len(named):
        return {**ids, **{cpu: next(iter(id_of_mask[m])) for cpu, m in masks.items()}}
    rank = {first: i for i, first in enumerate(sorted({(m & -m).bit_length() - 1 for m in id_of_mask}))}
    return {**ids, **{cpu: rank[(m & -m).bit_length() - 1] for cpu, m in masks.items()}}


def _list_mask(text: str, what: str) -> int:
    return parse_cpulist(text, what).mask


def _memory_from_proc(meminfo: str, where: str, draft: Draft) -> None:
    """Node 0's memory and hugepages from `/proc/meminfo`, for a kernel without NUMA folders."""
    values: dict[str, int] = {}
    for line in meminfo.replace("\x00", "").splitlines():
        m = re.match(r"^(MemTotal|HugePages_Total|Hugepagesize):\s+(\d+)", line)
        if m:
            values[m.group(1)] = parse_int(m.group(2), f"{where} {m.group(1)}")
    if "MemTotal" in values:
        draft.numa_memory[0] = values["MemTotal"] * 1024
    if values.get("HugePages_Total") and values.get("Hugepagesize"):
        size = values["Hugepagesize"] * 1024
        draft.numa_hugepages[0] = {hugepage_key(size): size * values["HugePages_Total"]}


def _model(cpuinfo: str) -> str:
    """The processor's name: x86/arm `model name`, else POWER's `cpu` line (never `cpu family`)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields.get("model name") or fields.get("cpu") or ""


def _memtotal(meminfo: str, where: str) -> int:
    for line in meminfo.splitlines():
        m = re.match(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s*kB", line.replace("\x00", ""))
        if m:
            return parse_int(m.group(1), where) * 1024
    return 0


def _l3(indexes: dict[str, dict[str, str]], where: str) -> int | None:
    for index in sorted(indexes):
        entry = indexes[index]
        if entry.get("level") != "3":
            continue
        if entry.get("id"):
            return parse_int(entry["id"], f"{where}/cache/{index}/id")
        if entry.get("shared_cpu_list"):
            shared = parse_cpulist(entry["shared_cpu_list"], f"{where}/cache/{index}/shared_cpu_list")
            return min(shared) if shared else None
        if entry.get("shared_cpu_map"):
            shared_mask = parse_hex_mask(entry["shared_cpu_map"], f"{where}/cache/{index}/shared_cpu_map")
            return bits(shared_mask)[0] if shared_mask else None
    return None


def _distances(nodes: dict[int, dict[str, str]], files: dict[str, str],
               name: str) -> dict[int, dict[int, int]] | None:
    rows = {nid: entry["distance"] for nid, entry in nodes.items() if "distance" in entry}
    if not rows:
        return None
    columns_options = [sorted(nodes)]
    for fname in ("possible", "online"):
        text = files.get(f"sys/devices/system/node/{fname}")
        if text:
            columns_options.append(list(parse_cpulist(_clean(text), f"{name}: node/{fname}")))
    out: dict[int, dict[int, int]] = {}
    for nid, text in rows.items():
        values = [parse_int(v, f"{name}: node{nid}/distance") for v in _clean(text).split()]
        cols = next((c for c in columns_options if len(c) == len(values)), None)
        if cols is None:
            raise FormatError(f"{name}: node{nid}/distance has {len(values)} values for nodes {sorted(nodes)}")
        out[nid] = dict(zip(cols, values, strict=True))
    return out
