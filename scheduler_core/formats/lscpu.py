"""`lscpu` output: the summary (`Key: value` lines), `lscpu -p` / `--parse[=cols]` sections (any
column order, `-` or empty for unknown, `#` comment lines whose last one is the header) and the
`lscpu -e` table. util-linux's test files hold summary + `--parse` + `--parse --physical`.

Per-CPU rows, when present, decide everything: two CPUs share a core only if they agree on the
Socket, Book, Drawer and Core columns of every parse section given (logical and physical ids
together, so a column that is too coarse in one section is refined by the other). Sockets are the
first section's Socket column. NUMA comes from the Node column, else from the summary's
`NUMA nodeN CPU(s)` lines (stride notation `0-62:2` accepted, CPUs beyond the online list
ignored), else one node 0 (`numa_nodes` inferred). A summary line with no CPUs (a memory-only
node, as on POWER) adds that NUMA node whether or not parse rows are present. Uncore: the L3 column.

Summary only (no rows): the CPUs are `On-line CPU(s) list` (else 0..CPU(s)-1); with `Thread(s) per
core` T, the siblings of a core are the CPUs at positions p, p+N/T, ... (the usual Linux x86
numbering), or adjacent positions when that would split a core across NUMA nodes; sockets take
`Core(s) per socket` consecutive cores when `Socket(s)` × cores × T equals the CPU count, else one
socket per NUMA node. `cores` and `sockets` are then flagged as inferred.
"""

from __future__ import annotations

import re

from ..errors import FormatError
from ._common import CPURecord, Draft, check_id, parse_cpulist, parse_id, parse_int

_NUMA_LINE = re.compile(r"^NUMA node(\d+) CPU\(s\):\s*(.*)$")
_KV = re.compile(r"^([A-Za-z][^:]{0,60}):\s*(.*)$")


def load(text: str, fmt: str = "lscpu-text") -> Draft:
    lines = text.splitlines()
    summary: list[tuple[str, str, int]] = []
    sections: list[dict] = []
    extended = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        if s.startswith("#"):
            header_line = i
            while i < len(lines) and lines[i].strip().startswith("#"):
                header_line = i
                i += 1
            header = [c.strip() for c in lines[header_line].strip().lstrip("#").split(",")]
            rows = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith("#"):
                rows.append((i + 1, [c.strip() for c in lines[i].split(",")]))
                i += 1
            sections.append({"header": header, "rows": rows, "line": header_line + 1})
            continue
        tokens = s.upper().split()
        if extended is None and tokens and tokens[0] == "CPU" and any(
                t in ("NODE", "SOCKET", "CORE", "ONLINE") for t in tokens[1:]):
            extended = _read_extended(lines, i)
            i = extended["end"]
            continue
        m = _KV.match(s)
        if m:
            summary.append((m.group(1).strip(), m.group(2).strip(), i + 1))
        i += 1
    draft = Draft(description="lscpu")
    numa_lists = _numa_lists(summary)
    offline_text = next((v for k, v, _ in summary if k == "Off-line CPU(s) list"), "")
    if offline_text:
        draft.offline = parse_cpulist(offline_text, "lscpu: Off-line CPU(s) list").mask
    model = next((v for k, v, _ in summary if k == "Model name"), "")
    if model:
        draft.description = f"lscpu: {model}"
    if extended is not None:
        sections = [extended]
    sections = [sec for sec in sections if sec["header"]]
    if sections:
        _from_sections(sections, numa_lists, draft, _declared_cores(summary))
    else:
        _from_summary(summary, numa_lists, draft)
    for nid in numa_lists:  # a memory-only node (no CPUs) is only in the summary's NUMA lines
        draft.numa_memory.setdefault(nid, 0)
    return draft


def _read_extended(lines: list[str], start: int) -> dict:
    header = lines[start].split()
    rows = []
    i = start + 1
    while i < len(lines) and lines[i].strip():
        rows.append((i + 1, lines[i].split()))
        i += 1
    return {"header": header, "rows": rows, "line": start + 1, "end": i}


def _numa_lists(summary: list) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for key, value, lineno in summary:
        m = _NUMA_LINE.match(f"{key}: {value}")
        if m:
            nid = parse_id(m.group(1), "NUMA node", f"lscpu line {lineno}: NUMA node id")
            out[nid] = (parse_cpulist(m.group(2), f"lscpu line {lineno}: NUMA node{nid} CPU(s)").mask, lineno)
    return out


def _col(header: list[str], *names: str) -> int | None:
    upper = [h.upper() for h in header]
    for n in names:
        if n in upper:
            return upper.index(n)
    return None


def _cell(row: list[str], idx: int | None) -> str:
    if idx is None or idx >= len(row):
        return ""
    v = row[idx].strip()
    return "" if v == "-" else v


def _declared_cores(summary: list) -> int | None:
    """Σ Core(s) per socket × Socket(s) over the summary's blocks (hybrid chips repeat them)."""
    cps = _value(summary, "Core(s) per socket")
    sockets = _value(summary, "Socket(s)")
    if not cps or len(cps) != len(sockets):
        return None
    try:
        return sum(int(c) * int(s) for (c, _), (s, _) in zip(cps, sockets, strict=True))
    except ValueError:
        return None


def _from_sections(sections: list[dict], numa_lists: dict, draft: Draft, declared: int | None) -> None:
    per_cpu: dict[int, list] = {}
    first = sections[0]
    socket_of: dict[int, int | None] = {}
    node_of: dict[int, int | None] = {}
    l3_of: dict[int, int | None] = {}
    for n, sec in enumerate(sections):
        h = sec["header"]
        c_cpu = _col(h, "CPU")
        if c_cpu is None:
            raise FormatError(f"lscpu line {sec['line']}: the header {','.join(h)!r} has no CPU column")
        c_core, c_sock, c_node = _col(h, "CORE"), _col(h, "SOCKET"), _col(h, "NODE")
        c_book, c_drawer, c_online = _col(h, "BOOK"), _col(h, "DRAWER"), _col(h, "ONLINE")
        c_l3 = _col(h, "L3")
        c_caches = next((k for k, name in enumerate(h) if ":" in name), None)
        seen: set[int] = set()
        for lineno, row in sec["rows"]:
            where = f"lscpu line {lineno}"
            cpu_text = _cell(row, c_cpu)
            if not cpu_text:
                raise FormatError(f"{where}: no CPU id in {','.join(row)!r}")
            cpu = parse_id(cpu_text, "CPU", f"{where}: CPU id")
            if cpu in seen:
                raise FormatError(f"{where}: CPU {cpu} is listed twice")
            seen.add(cpu)
            online = _cell(row, c_online).lower()
            if online in ("n", "no", "0"):
                draft.offline |= 1 << cpu
                continue
            if _cell(row, c_core).isdigit():
                check_id(int(_cell(row, c_core)), "core", f"{where}: Core")
            key = per_cpu.setdefault(cpu, [])
            for c in (c_drawer, c_book, c_sock, c_core):
                key.append(_cell(row, c))
            if n == 0 or cpu not in socket_of:
                sock = _cell(row, c_sock)
                socket_of[cpu] = parse_id(sock, "socket", f"{where}: Socket") if sock else None
                node = _cell(row, c_node)
                node_of[cpu] = parse_id(node, "NUMA node", f"{where}: Node") if node else None
                l3 = _cell(row, c_l3)
                if not l3 and c_caches is not None:
                    names = h[c_caches].split(":")
                    vals = _cell(row, c_caches).split(":")
                    if "L3" in names and len(vals) == len(names):
                        l3 = vals[names.index("L3")]
                l3_of[cpu] = parse_int(l3, f"{where}: L3") if l3 and l3 != "-" else None
        if n == 0 and not seen:
            raise FormatError(f"lscpu line {sec['line']}: parse section with a header and no CPU rows")
    if not per_cpu:
        raise FormatError(f"lscpu line {first['line']}: no online CPU rows")
    cpus = sorted(per_cpu)
    if any(v is None for v in node_of.values()):
        node_of = _numa_from_summary(cpus, numa_lists, draft)
    unknown_socket = any(v is None for v in socket_of.values())
    if unknown_socket:
        draft.inferred.add("sockets")
    # the first section's ids name the cores; all sections together refine them when the summary's
    # declared core count says the first section alone is too coarse (seen on hybrid chips)
    keys = {}
    for width in (4, None):
        keys[width] = {cpu: ("core", socket_of[cpu], node_of[cpu], *per_cpu[cpu][:width]) for cpu in cpus}
    chosen = keys[4]
    if declared is not None and len(set(chosen.values())) != declared \
            and len(set(keys[None].values())) == declared:
        chosen = keys[None]
    for cpu in cpus:
        socket = socket_of[cpu] if socket_of[cpu] is not None else node_of[cpu]
        key = chosen[cpu] if any(per_cpu[cpu]) else ("cpu", cpu)
        draft.cpus.append(CPURecord(cpu, key, socket, node_of[cpu], l3_of.get(cpu)))
    if all(not any(per_cpu[c]) for c in cpus):
        draft.inferred.add("cores")


def _numa_from_summary(cpus: list[int], numa_lists: dict, draft: Draft) -> dict[int, int]:
    out: dict[int, int] = {}
    if numa_lists:
        for nid in sorted(numa_lists):
            mask = numa_lists[nid][0]
            for cpu in cpus:
                if mask >> cpu & 1:
                    out.setdefault(cpu, nid)
        missing = [c for c in cpus if c not in out]
        if missing:
            raise FormatError(f"lscpu: CPU {missing[0]} is in no 'NUMA nodeN CPU(s)' line")
        for nid in numa_lists:
            draft.numa_memory.setdefault(nid, 0)
        return out
    draft.inferred.add("numa_nodes")
    return dict.fromkeys(cpus, 0)


def _value(summary: list, key: str) -> list[tuple[str, int]]:
    return [(v, ln) for k, v, ln in summary if k == key]


def _from_summary(summary: list, numa_lists: dict, draft: Draft) -> None:
    online = _value(summary, "On-line CPU(s) list")
    count = _value(summary, "CPU(s)")
    if online:
        cpus = list(parse_cpulist(online[0][0], f"lscpu line {online[0][1]}: On-line CPU(s) list"))
    elif count:
        n = parse_int(count[0][0], f"lscpu line {count[0][1]}: CPU(s)", 1)
        if n > 65536:
            raise FormatError(f"lscpu line {count[0][1]}: CPU(s) {n} is above 65536")
        cpus = list(range(n))
    else:
        raise FormatError("lscpu: no CPU lines (neither parse rows nor 'CPU(s):' / 'On-line CPU(s) list:')")
    if not cpus:
        raise FormatError("lscpu: the On-line CPU(s) list is empty")
    numa = _numa_from_summary(cpus, numa_lists, draft)
    n = len(cpus)
    tpc = _value(summary, "Thread(s) per core")
    cps = _value(summary, "Core(s) per socket")
    sockets = _value(summary, "Socket(s)")
    threads = 1
    if len(tpc) == 1:
        threads = parse_int(tpc[0][0], f"lscpu line {tpc[0][1]}: Thread(s) per core", 1)
        if n % threads:
            threads = 1
    cores_n = n // threads
    core_of = _sibling_rule(cpus, numa, threads, cores_n)
    if core_of is None:
        threads, cores_n = 1, n
        core_of = list(range(n))
    per_socket = None
    if len(cps) == 1 and len(sockets) == 1:
        c = parse_int(cps[0][0], f"lscpu line {cps[0][1]}: Core(s) per socket", 1)
        s = parse_int(sockets[0][0], f"lscpu line {sockets[0][1]}: Socket(s)", 1)
        if c * s == cores_n:
            per_socket = c
    if threads > 1 or n > 1:
        draft.inferred.add("cores")
    if per_socket is None:
        draft.inferred.add("sockets")
    for pos, cpu in enumerate(cpus):
        core = core_of[pos]
        socket = core // per_socket if per_socket else numa[cpu]
        draft.cpus.append(CPURecord(cpu, ("core", core), socket, numa[cpu]))


def _sibling_rule(cpus: list[int], numa: dict, threads: int, cores_n: int) -> list[int] | None:
    """Core index per CPU position: strided (p mod cores) first, adjacent (p // threads) second;
    the first that keeps every core on one NUMA node wins."""
    for rule in (lambda p: p % cores_n, lambda p: p // threads):
        core_numa: dict[int, int] = {}
        ok = True
        out = []
        for pos, cpu in enumerate(cpus):
            core = rule(pos)
            if core_numa.setdefault(core, numa[cpu]) != numa[cpu]:
                ok = False
                break
            out.append(core)
        if ok:
            return out
    return None
