"""Test inputs written the way the real tools write them (hwloc's XML export, util-linux lscpu,
hwloc-gather-topology's sysfs tarball), for machines described by a small spec.

A machine spec: `cpus` = list of (cpu id, package id as sysfs says it, core id, NUMA id), plus
`numa_memory_kb` per NUMA node (memory-only nodes allowed) and an optional distance matrix."""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass, field

from scheduler_core.model.cpuset import CPUSet


@dataclass
class Machine:
    cpus: list[tuple[int, int, int, int]]
    numa_memory_kb: dict[int, int]
    distances: dict[int, dict[int, int]] | None = None
    model: str = "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz"
    cpu_family: str = "6"
    power: bool = False
    extra_files: bool = True
    package_lists: dict[int, str] = field(default_factory=dict)

    def siblings(self, cpu: int) -> CPUSet:
        """The threads of cpu's core: same package (sibling list) and same core id."""
        package = self.package(cpu)
        core = next(c for i, _, c, _ in self.cpus if i == cpu)
        return CPUSet(i for i, _, c, _ in self.cpus if c == core and i in package)

    def package(self, cpu: int) -> CPUSet:
        if cpu in self.package_lists:
            return CPUSet.parse(self.package_lists[cpu])
        pkg = next(p for i, p, _, _ in self.cpus if i == cpu)
        return CPUSet(i for i, p, _, _ in self.cpus if p == pkg)

    def numa_cpus(self, nid: int) -> CPUSet:
        return CPUSet(i for i, _, _, n in self.cpus if n == nid)


def xeon(sockets: int = 2, cores: int = 12, threads: int = 2) -> Machine:
    """Linux x86 numbering: SMT siblings N and N + sockets×cores; one NUMA node per socket."""
    per = sockets * cores
    cpus = [(t * per + s * cores + c, s, c, s) for t in range(threads) for s in range(sockets) for c in range(cores)]
    dist = {a: {b: 10 if a == b else 21 for b in range(sockets)} for a in range(sockets)}
    return Machine(sorted(cpus), {s: 96 * 2**20 for s in range(sockets)}, dist)


# -- hwloc XML ------------------------------------------------------------------------------------
def hwloc_array(tag: str, values) -> list[str]:
    """An array the way hwloc's XML export writes it: ten numbers per element, each followed by a
    space, `length` = the element's character count."""
    values = list(values)
    out = []
    for i in range(0, len(values), 10):
        text = "".join(f"{v} " for v in values[i:i + 10])
        out.append(f'<{tag} length="{len(text)}">{text}</{tag}>')
    return out


def hwloc_distances(matrix: dict[int, dict[int, int]]) -> list[str]:
    ids = sorted(matrix)
    out = [f'<distances2 type="NUMANode" nbobjs="{len(ids)}" kind="5" name="NUMALatency" indexing="os">']
    out += hwloc_array("indexes", ids)
    out += hwloc_array("u64values", [matrix[a][b] for a in ids for b in ids])
    out.append("</distances2>")
    return out


# -- lscpu ----------------------------------------------------------------------------------------
_PARSE_HEADER = ("# The following is the parsable format, which can be fed to other\n"
                 "# programs. Each different item in every column has an unique ID\n"
                 "# starting usually from zero.\n")


def lscpu(m: Machine, parse: bool = True) -> str:
    """util-linux's test layout: the summary, then `--parse` (logical ids) and `--parse --physical`
    (sysfs ids, `-` for -1). A memory-only NUMA node has an empty `NUMA nodeN CPU(s):` line."""
    ids = [c[0] for c in m.cpus]
    packages = sorted({min(m.package(i)) for i in ids})
    logical_socket = {i: packages.index(min(m.package(i))) for i in ids}
    core_keys = sorted({(logical_socket[i], min(m.siblings(i))) for i in ids}, key=lambda k: k[1])
    logical_core = {i: core_keys.index((logical_socket[i], min(m.siblings(i)))) for i in ids}
    threads = max(len(m.siblings(i)) for i in ids)
    lines = [f"CPU(s):              {len(ids)}", f"On-line CPU(s) list: {CPUSet(ids)}",
             f"Model name:          {m.model}", f"Thread(s) per core:  {threads}",
             f"Core(s) per socket:  {len(core_keys) // len(packages)}", f"Socket(s):           {len(packages)}",
             f"NUMA node(s):        {len(m.numa_memory_kb)}"]
    for nid in sorted(m.numa_memory_kb):
        lines.append(f"NUMA node{nid} CPU(s):   {m.numa_cpus(nid)}".rstrip())
    text = "\n".join(lines) + "\n"
    if not parse:
        return text
    for physical in (False, True):
        rows = ["# CPU,Core,Socket,Node"]
        for i, pkg, core, numa in m.cpus:
            if physical:
                rows.append(f"{i},{core},{'-' if pkg == -1 else pkg},{numa}")
            else:
                rows.append(f"{i},{logical_core[i]},{logical_socket[i]},{numa}")
        text += "\n" + _PARSE_HEADER + "\n".join(rows) + "\n"
    return text


# -- sysfs tarball ----------------------------------------------------------------------------------
def _cpuinfo(m: Machine) -> str:
    blocks = []
    for i, *_ in m.cpus:
        if m.power:
            blocks.append(f"processor\t: {i}\ncpu\t\t: {m.model}\nclock\t\t: 3800.000000MHz\nrevision\t: 2.2\n")
        else:
            blocks.append(f"processor\t: {i}\nvendor_id\t: GenuineIntel\ncpu family\t: {m.cpu_family}\n"
                          f"model\t\t: 85\nmodel name\t: {m.model}\nstepping\t: 7\ncpu MHz\t\t: 3000.000\n")
    return "\n".join(blocks)


def sysfs_tarball(m: Machine, root: str = "machine") -> bytes:
    """A tar.bz2 laid out like hwloc-gather-topology's: `<root>/sys/devices/system/{cpu,node}` with
    directories, per-CPU topology, cache and cpufreq files, `cpuN/nodeM` links, `<root>/proc/cpuinfo`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as tar:
        def d(path):
            info = tarfile.TarInfo(f"{root}/{path}")
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)

        def f(path, text):
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{path}")
            info.size = len(data)
            info.mode = 0o444
            tar.addfile(info, io.BytesIO(data))

        def ln(path, target):
            info = tarfile.TarInfo(f"{root}/{path}")
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)

        ids = [c[0] for c in m.cpus]
        cpu_dir = "sys/devices/system/cpu"
        for p in ("sys", "sys/devices", "sys/devices/system", cpu_dir, "sys/devices/system/node", "proc"):
            d(p)
        f(f"{cpu_dir}/online", f"{CPUSet(ids)}\n")
        f(f"{cpu_dir}/possible", f"{CPUSet(ids)}\n")
        f(f"{cpu_dir}/present", f"{CPUSet(ids)}\n")
        f(f"{cpu_dir}/kernel_max", "8191\n")
        for i, pkg, core, numa in m.cpus:
            base = f"{cpu_dir}/cpu{i}"
            d(base)
            d(f"{base}/topology")
            sib, package = m.siblings(i), m.package(i)
            topo = {"physical_package_id": pkg, "core_id": core, "die_id": 0 if not m.power else -1,
                    "cluster_id": 65535, "book_id": -1, "drawer_id": -1,
                    "thread_siblings_list": sib, "thread_siblings": _hex(sib), "core_cpus_list": sib,
                    "core_cpus": _hex(sib), "core_siblings_list": package, "core_siblings": _hex(package),
                    "package_cpus_list": package, "package_cpus": _hex(package), "die_cpus_list": package,
                    "die_cpus": _hex(package), "cluster_cpus_list": sib, "cluster_cpus": _hex(sib)}
            for name, value in topo.items():
                f(f"{base}/topology/{name}", f"{value}\n")
            if m.extra_files:
                d(f"{base}/cache")
                for index, (level, kind, size, shared) in enumerate(
                        ((1, "Data", "32K", sib), (1, "Instruction", "32K", sib), (2, "Unified", "1024K", sib),
                         (3, "Unified", "36608K", package))):
                    cdir = f"{base}/cache/index{index}"
                    d(cdir)
                    for name, value in (("level", level), ("type", kind), ("size", size),
                                        ("shared_cpu_list", shared), ("shared_cpu_map", _hex(shared)),
                                        ("coherency_line_size", 64), ("ways_of_associativity", 8),
                                        ("number_of_sets", 64), ("physical_line_partition", 1),
                                        ("id", min(package) if level == 3 else min(sib))):
                        f(f"{cdir}/{name}", f"{value}\n")
                d(f"{base}/cpufreq")
                for name in ("cpuinfo_max_freq", "cpuinfo_min_freq", "scaling_cur_freq", "scaling_governor",
                             "scaling_driver", "scaling_max_freq", "scaling_min_freq", "affected_cpus"):
                    f(f"{base}/cpufreq/{name}", "powersave\n" if "governor" in name else "3000000\n")
            if i:
                f(f"{base}/online", "1\n")
            ln(f"{base}/node{numa}", f"../../node/node{numa}")
        node_dir = "sys/devices/system/node"
        nodes = sorted(m.numa_memory_kb)
        f(f"{node_dir}/online", f"{CPUSet(nodes)}\n")
        f(f"{node_dir}/possible", f"{CPUSet(nodes)}\n")
        f(f"{node_dir}/has_cpu", f"{CPUSet(n for n in nodes if m.numa_cpus(n))}\n")
        for nid in nodes:
            ndir = f"{node_dir}/node{nid}"
            d(ndir)
            cpus = m.numa_cpus(nid)
            f(f"{ndir}/cpulist", f"{cpus}\n")
            f(f"{ndir}/cpumap", f"{_hex(cpus)}\n")
            f(f"{ndir}/meminfo", f"Node {nid} MemTotal:       {m.numa_memory_kb[nid]} kB\n"
                                 f"Node {nid} MemFree:        {m.numa_memory_kb[nid] // 2} kB\n")
            if m.distances:
                f(f"{ndir}/distance", " ".join(str(m.distances[nid][b]) for b in nodes) + "\n")
            for c in cpus:
                ln(f"{ndir}/cpu{c}", f"../../cpu/cpu{c}")
        f("proc/cpuinfo", _cpuinfo(m))
    return buf.getvalue()


def _hex(cpus: CPUSet) -> str:
    mask = cpus.mask
    words = []
    while True:
        words.append(f"{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
        if not mask:
            break
    return ",".join(reversed(words))
