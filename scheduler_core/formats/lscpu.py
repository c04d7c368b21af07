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
from dataclasses import dataclass, field

from ..errors import FormatError
from ._draft import CPURecord, Draft
from ._values import check_id, parse_cpulist, parse_id, parse_int

_NUMA_LINE = re.compile(r"^NUMA node(\d+) CPU\(s\):\s*(.*)$")
_KV = re.compile(r"^([A-Za-z][^:]{0,60}):\s*(.*)$")

#: The summary's `Key: value` lines: (key, value, line number).
Summary = list[tuple[str, str, int]]


@dataclass
class _Section:
    """A table of per-CPU rows: a `--parse` section or the `-e` table, with the line of its header."""

    header: list[str]
    rows: list[tuple[int, list[str]]]
    line: int
    end: int = 0


@dataclass
class _Rows:
    """What the parse rows say per online CPU: the Drawer, Book, Socket and Core cells of every
    section (the core key), and the first section's socket, NUMA node and L3 ids."""

    cells: dict[int, list[str]] = field(default_factory=dict)
    socket: dict[int, int | None] = field(default_factory=dict)
    node: dict[int, int | None] = field(default_factory=dict)
    l3: dict[int, int | None] = field(default_factory=dict)


def load(text: str, fmt: str = "lscpu-text") -> Draft:
    lines = text.splitlines()
    summary: Summary = []
    sections: list[_Section] = []
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
            sections.append(_Section(header, rows, header_line + 1))
            continue
        tokens = s.upper().split()
        if extended is None and tokens and tokens[0] == "CPU" and any(
                t in ("NODE", "SOCKET", "CORE", "ONLINE") for t in tokens[1:]):
            extended = _read_extended(lines, i)
            i = extended.end
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
    sections = [sec for sec in sections if sec.header]
    if sections:
        _from_sections(sections, numa_lists, draft, _declared_cores(summary))
    else:
        _from_summary(summary, numa_lists, draft)
    for nid in numa_lists:  # a memory-only node (no CPUs) is only in the summary's NUMA lines
        draft.numa_memory.setdefault(nid, 0)
    return draft


def _read_extended(lines: list[str], start: int) -> _Section:
    header = lines[start].split()
    rows = []
    i = start + 1
    while i < len(lines) and lines[i].strip():
        rows.append((i + 1, lines[i].split()))
        i += 1
    return _Section(header, rows, start + 1, i)


def _numa_lists(summary: Summary) -> dict[int, tuple[int, int]]:
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


def _declared_cores(summary: Summary) -> int | None:
    """Σ Core(s) per socket × Socket(s) over the summary's blocks (hybrid chips repeat them)."""
    cps = _value(summary, "Core(s) per socket")
    sockets = _value(summary, "Socket(s)")
    if not cps or len(cps) != len(sockets):
        return None
    try:
        return sum(int(c) * int(s) for (c, _), (s, _) in zip(cps, sockets, strict=True))
    except ValueError:
        return None


def _from_sections(sections: list[_Section], numa_lists: dict[int, tuple[int, int]], draft: Draft,
                   declared: int | None) -> None:
    """CPU records from parse rows (the rules in the module docstring); offline rows go to `draft.offline`."""
    rows = _Rows()
    for n, sec in enumerate(sections):
        seen = _read_section(sec, n == 0, rows, draft)
        if n == 0 and not seen:
            raise FormatError(f"lscpu line {sec.line}: parse section with a header and no CPU rows")
    if not rows.cells:
        raise FormatError(f"lscpu line {sections[0].line}: no online CPU rows")
    cpus = sorted(rows.cells)
    known = {cpu: nid for cpu, nid in rows.node.items() if nid is not None}
    node_of = known if len(known) == len(rows.node) else _numa_from_summary(cpus, numa_lists, draft)
    if any(v is None for v in rows.socket.values()):
        draft.inferred.add("sockets")
    chosen = _core_keys(cpus, rows, node_of, declared)
    for cpu in cpus:
        sock = rows.socket[cpu]
        key = chosen[cpu] if any(rows.cells[cpu]) else ("cpu", cpu)
        draft.cpus.append(CPURecord(cpu, key, sock if sock is not None else node_of[cpu], node_of[cpu],
                                    rows.l3.get(cpu)))
    if all(not any(rows.cells[c]) for c in cpus):
        draft.inferred.add("cores")


def _read_section(sec: _Section, first: bool, rows: _Rows, draft: Draft) -> set[int]:
    """One section's rows into `rows` (socket, node and L3 from the first section that lists a CPU);
    returns the CPU ids it lists."""
    h = sec.header
    c_cpu = _col(h, "CPU")
    if c_cpu is None:
        raise FormatError(f"lscpu line {sec.line}: the header {','.join(h)!r} has no CPU column")
    c_core, c_sock, c_node = _col(h, "CORE"), _col(h, "SOCKET"), _col(h, "NODE")
    c_book, c_drawer, c_online = _col(h, "BOOK"), _col(h, "DRAWER"), _col(h, "ONLINE")
    c_l3 = _col(h, "L3")
    c_caches = next((k for k, name in enumerate(h) if ":" in name), None)
    seen: set[int] = set()
    for lineno, row in sec.rows:
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
        rows.cells.setdefault(cpu, []).extend(_cell(row, c) for c in (c_drawer, c_book, c_sock, c_core))
        if first or cpu not in rows.socket:
            sock = _cell(row, c_sock)
            rows.socket[cpu] = parse_id(sock, "socket", f"{where}: Socket") if sock else None
            node = _cell(row, c_node)
            rows.node[cpu] = parse_id(node, "NUMA node", f"{where}: Node") if node else None
            l3 = _cell(row, c_l3)
            if not l3 and c_caches is not None:
                names = h[c_caches].split(":")
                vals = _cell(row, c_caches).split(":")
                if "L3" in names and len(vals) == len(names):
                    l3 = vals[names.index("L3")]
            rows.l3[cpu] = parse_int(l3, f"{where}: L3") if l3 and l3 != "-" else None
    return seen


def _core_keys(cpus: list[int], rows: _Rows, node_of: dict[int, int],
               declared: int | None) -> dict[int, tuple[str | int | None, ...]]:
    """Each CPU's core key. The first section's ids name the cores; all sections together refine them
    when the summary's declared core count says the first section alone is too coarse (seen on
    hybrid chips)."""
    first = {cpu: ("core", rows.socket[cpu], node_of[cpu], *rows.cells[cpu][:4]) for cpu in cpus}
    every = {cpu: ("core", rows.socket[cpu], node_of[cpu], *rows.cells[cpu]) for cpu in cpus}
    if declared is not None and len(set(first.values())) != declared and len(set(every.values())) == declared:
        return every
    return first


def _numa_from_summary(cpus: list[int], numa_lists: dict[int, tuple[int, int]], draft: Draft) -> dict[int, int]:
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


def _value(summary: Summary, key: str) -> list[tuple[str, int]]:
    return [(v, ln) for k, v, ln in summary if k == key]


def _from_summary(summary: Summary, numa_lists: dict[int, tuple[int, int]], draft: Draft) -> None:
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


def _sibling_rule(cpus: list[int], numa: dict[int, int], threads: int, cores_n: int) -> list[int] | None:
    """Core index per CPU position: strided (p mod cores) first, adjacent (p // threads) second;
    the first that keeps every core on one NUMA node wins."""
    for strided in (True, False):
        core_numa: dict[int, int] = {}
        ok = True
        out = []
        for pos, cpu in enumerate(cpus):
            core = pos % cores_n if strided else pos // threads
            if core_numa.setdefault(core, numa[cpu]) != numa[cpu]:
                ok = False
                break
            out.append(core)
        if ok:
            return out
    return None
