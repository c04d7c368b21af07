"""hwloc synthetic strings: `pack:2 numa:2 core:8 pu:2`, `package:2 [numa] l3:4 core:4 pu:2`, or
bare arities `2 2 8 2`.

Levels: pack/package/socket, numa/node/numanode (a level, or `[numa]` attached to the level before
it, i.e. one node per object of that level), group, die, l3/l3cache (the uncore cache), l2/l1,
core, pu. Attributes in parentheses are accepted; `numa:N(memory=16GB)` sets each node's memory.
Bare arities follow hwloc's naming from the bottom: the last level is PU, then Core, then
Package, then Groups (with no NUMA level the machine is one NUMA node, flagged `numa_nodes`).
CPU ids are given in tree order (the threads of core 0 are 0..pu-1), as hwloc numbers them.

Export (`dump`) writes `pack:S [numa:N] [l3:U] core:C pu:T` when every socket has the same number
of NUMA nodes, every NUMA node the same number of L3/cores and every core the same number of
threads, and the levels nest; otherwise FormatError (the machine is not symmetric).
"""

from __future__ import annotations

import re

from ..errors import FormatError
from ..model.topology import Topology
from ._draft import CPURecord, Draft

_TYPES = {
    "pack": "package", "package": "package", "socket": "package", "numa": "numa", "node": "numa",
    "numanode": "numa", "group": "group", "die": "die", "l3": "l3", "l3cache": "l3", "l2": "cache",
    "l2cache": "cache", "l1": "cache", "l1cache": "cache", "l1d": "cache", "l1i": "cache", "core": "core",
    "pu": "pu", "machine": "machine",
}
_TOKEN = re.compile(r"^(?:([A-Za-z][A-Za-z0-9]*)(?::(\d+))?|(\d+))(?:\(([^()]*)\))?$")
_SIZE = re.compile(r"^(\d+)\s*([KMGT]i?B|[kKMGT]B?|B)?$")
_UNITS = {"B": 1, "KB": 10**3, "K": 10**3, "MB": 10**6, "M": 10**6, "GB": 10**9, "G": 10**9, "TB": 10**12,
          "T": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
MAX_PUS = 65536


def _memory(attrs: str, where: str) -> int:
    for part in attrs.split():
        key, _, value = part.partition("=")
        if key.lower() == "memory":
            m = _SIZE.match(value.strip())
            if not m:
                raise FormatError(f"synthetic: {where}: memory {value!r} is not a size such as 16GB")
            return int(m.group(1)) * _UNITS[(m.group(2) or "B").upper()]
    return 0


def parse_levels(text: str) -> list[tuple[str, int, int]]:
    """(kind, arity, memory per object) per level, top first; `[numa]` becomes an arity-1 NUMA level."""
    levels: list[tuple[str, int, int]] = []
    tokens = text.split()
    if not tokens:
        raise FormatError("synthetic: empty string")
    bare = []
    for pos, tok in enumerate(tokens, 1):
        where = f"token {pos} {tok!r}"
        attached = tok.startswith("[") and tok.endswith("]")
        body = tok[1:-1] if attached else tok
        m = _TOKEN.match(body)
        if not m:
            raise FormatError(f"synthetic: {where} is not 'type:count', a count, or '[numa]'")
        name, count, number, attrs = m.groups()
        memory = _memory(attrs or "", where)
        if attached:
            if not name or _TYPES.get(name.lower()) != "numa":
                raise FormatError(f"synthetic: {where}: only NUMA nodes can be attached in brackets")
            if count not in (None, "1"):
                raise FormatError(f"synthetic: {where}: an attached NUMA node has no count")
            levels.append(("numa", 1, memory))
            continue
        if number is not None:
            arity = int(number)
            bare.append(len(levels))
            levels.append(("?", arity, memory))
        else:
            kind = _TYPES.get(name.lower())
            if kind is None:
                raise FormatError(f"synthetic: {where}: unknown level type {name!r}")
            if kind == "machine":
                continue
            arity = int(count) if count is not None else 1
            levels.append((kind, arity, memory))
        if levels[-1][1] < 1 or levels[-1][1] > MAX_PUS:
            raise FormatError(f"synthetic: {where}: count must be between 1 and {MAX_PUS}")
    if bare:
        names = ["pu", "core", "package"]
        for i, idx in enumerate(reversed(bare)):
            kind = names[i] if i < len(names) else "group"
            levels[idx] = (kind, levels[idx][1], levels[idx][2])
    kinds = [k for k, _, _ in levels]
    if kinds[-1] != "pu":
        raise FormatError("synthetic: the last level must be pu")
    for kind in ("pu", "core", "package"):
        if kinds.count(kind) > 1:
            raise FormatError(f"synthetic: level {kind} appears twice")
    total = 1
    for _, arity, _ in levels:
        total *= arity
        if total > MAX_PUS:
            raise FormatError(f"synthetic: more than {MAX_PUS} PUs")
    return levels


def load(text: str) -> Draft:
    levels = parse_levels(text.strip())
    draft = Draft(description=f"hwloc synthetic: {' '.join(text.split())}")
    kinds = [k for k, _, _ in levels]
    if "numa" not in kinds:
        draft.inferred.add("numa_nodes")
    if "package" not in kinds:
        draft.inferred.add("sockets")
    counters = dict.fromkeys(("package", "numa", "l3", "core"), 0)
    numa_memory: dict[int, int] = {}

    def walk(depth: int, ctx: dict[str, int]) -> None:
        kind, arity, memory = levels[depth]
        for _ in range(arity):
            here = dict(ctx)
            if kind in counters:
                here[kind] = counters[kind]
                counters[kind] += 1
                if kind == "numa":
                    numa_memory[here["numa"]] = memory
            if kind == "pu":
                cpu = len(draft.cpus)
                core = here.get("core", ("pu", cpu))
                draft.cpus.append(CPURecord(cpu, ("core", core), here.get("package", 0), here.get("numa", 0),
                                            here.get("l3")))
            else:
                walk(depth + 1, here)

    walk(0, {})
    draft.numa_memory = numa_memory or {0: 0}
    return draft


def dump(topology: object) -> str:
    """The synthetic string of a symmetric machine; FormatError naming the asymmetry otherwise."""
    if not isinstance(topology, Topology):
        raise FormatError("synthetic export needs a Topology or a Node")
    t = topology
    sockets = t.socket_cpus
    if len(t.numa_ids) == 1 and len(sockets) > 1:
        threads = {m.bit_count() for m in t.core_cpus.values()}
        per_socket = {sum(1 for m in t.core_cpus.values() if m & cpus) for cpus in sockets.values()}
        if len(threads) == 1 and len(per_socket) == 1:
            return f"pack:{len(sockets)} core:{per_socket.pop()} pu:{threads.pop()}"
    numa_per_socket = {s: len(n) for s, n in t.socket_numas.items()}
    if len(set(numa_per_socket.values())) != 1:
        raise FormatError(f"not symmetric: sockets hold different numbers of NUMA nodes {numa_per_socket}")
    sockets_per_numa = {n: len(s) for n, s in t.numa_sockets.items() if t.numa_cpus[n]}
    if any(v != 1 for v in sockets_per_numa.values()):
        raise FormatError("not symmetric: a NUMA node spans several sockets")
    if any(not m for m in t.numa_cpus.values()):
        raise FormatError("not symmetric: a NUMA node has no CPUs")
    cores_per_numa = {n: sum(1 for m in t.core_cpus.values() if m & cpus) for n, cpus in t.numa_cpus.items()}
    if len(set(cores_per_numa.values())) != 1:
        raise FormatError(f"not symmetric: NUMA nodes hold different numbers of cores {cores_per_numa}")
    threads = {m.bit_count() for m in t.core_cpus.values()}
    if len(threads) != 1:
        raise FormatError(f"not symmetric: cores have different numbers of threads {sorted(threads)}")
    for core, m in t.core_cpus.items():
        if not any(m & ~cpus == 0 for cpus in t.numa_cpus.values()):
            raise FormatError(f"not symmetric: core {core} spans NUMA nodes")
    has_l3 = any(c.uncore != c.socket for c in t.cpus) and len(t.uncore_cpus) != len(sockets)
    l3_part = ""
    cores = next(iter(cores_per_numa.values()))
    if has_l3:
        l3_per_numa = {n: sum(1 for m in t.uncore_cpus.values() if m & cpus) for n, cpus in t.numa_cpus.items()}
        l3_sizes = {sum(1 for m in t.core_cpus.values() if m & u) for u in t.uncore_cpus.values()}
        per = next(iter(l3_per_numa.values()))
        nested = all(any(u & ~cpus == 0 for cpus in t.numa_cpus.values()) for u in t.uncore_cpus.values())
        if len(set(l3_per_numa.values())) != 1 or len(l3_sizes) != 1 or not nested:
            raise FormatError("not symmetric: L3 caches differ between NUMA nodes")
        if per > 1:
            l3_part = f" l3:{per}"
            cores //= per
    npn = next(iter(numa_per_socket.values()))
    numa_part = f" numa:{npn}" if npn > 1 else " [numa]"
    memories = {n.memory for n in t.numa_nodes}
    if len(memories) == 1 and next(iter(memories)):
        mem = next(iter(memories))
        numa_part = f" numa:{npn}(memory={mem})" if npn > 1 else f" [numa(memory={mem})]"
    return f"pack:{len(sockets)}{numa_part}{l3_part} core:{cores} pu:{threads.pop()}"
