"""`numactl --hardware` output: `available: N nodes (list)`, `node X cpus: ...` (space separated, or
ranges with `--cpu-compress`), `node X size: N MB` (`<not available>` when unknown), the distance
table (`node 0 1 ...` header then `i: d d ...` rows, trailing spaces tolerated), or
`No distance information available.`.

numactl prints neither cores nor sockets; they are inferred (and flagged): with N CPUs, when every
CPU c < N/2 has c + N/2 on the same node, those two are one core (2 threads per core, the usual
Linux numbering), else every CPU is its own core. Sockets are the groups of nodes joined by
distances below 20 (SLIT's remote-socket distances are 20 and above); without a table, one socket
per node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import FormatError
from ..model.bitmask import bits_of as _bits
from ._draft import CPURecord, Draft
from ._values import parse_cpulist, parse_int

_AVAILABLE = re.compile(r"^available:\s*(\d+)\s+nodes?\s*(?:\((.*)\))?\s*$")
_NODE = re.compile(r"^node\s+(\d+)\s+(cpus|size|free):\s*(.*?)\s*$")
_ROW = re.compile(r"^\s*(\d+):\s*(.*)$")


@dataclass
class _Hardware:
    """What the lines of `numactl --hardware` state: the node count, each node's CPU mask and size
    (bytes), and the distance table (header node ids, one row per node)."""

    available: int | None = None
    node_cpus: dict[int, int] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    header: list[int] | None = None
    rows: dict[int, list[int]] = field(default_factory=dict)


def load(text: str) -> Draft:
    hw = _read(text)
    if hw.available is None:
        raise FormatError("numactl: no 'available: N nodes' line")
    if not hw.node_cpus:
        raise FormatError("numactl: no 'node N cpus:' lines")
    if hw.available != len(hw.node_cpus):
        raise FormatError(f"numactl: 'available: {hw.available} nodes' but {len(hw.node_cpus)} 'node N cpus' lines")
    draft = Draft(description="numactl --hardware")
    cpu_numa: dict[int, int] = {}
    for nid in sorted(hw.node_cpus):
        for cpu in _bits(hw.node_cpus[nid]):
            if cpu in cpu_numa:
                raise FormatError(f"numactl: CPU {cpu} is listed by nodes {cpu_numa[cpu]} and {nid}")
            cpu_numa[cpu] = nid
    if not cpu_numa:
        raise FormatError("numactl: no node lists any CPU")
    for nid in hw.node_cpus:
        draft.numa_memory[nid] = hw.sizes.get(nid, 0)
    if hw.header is not None and hw.rows:
        if sorted(hw.rows) != sorted(hw.header):
            raise FormatError(f"numactl: distance rows {sorted(hw.rows)} do not match the header {hw.header}")
        draft.distances = {a: dict(zip(hw.header, hw.rows[a], strict=True)) for a in hw.rows}
    # SMT siblings are guessed as Linux x86 numbers them (N and N + half) when every pair shares a node
    cpus = sorted(cpu_numa)
    n = len(cpus)
    half = n // 2
    paired = n % 2 == 0 and n > 1 and cpus == list(range(n)) and all(
        cpu_numa[c] == cpu_numa[c + half] for c in range(half))
    socket_of = _socket_groups(sorted(hw.node_cpus), draft.distances)
    for cpu in cpus:
        core = cpu % half if paired else cpu
        draft.cpus.append(CPURecord(cpu, ("core", core), socket_of[cpu_numa[cpu]], cpu_numa[cpu]))
    draft.inferred.update(("cores", "sockets"))
    return draft


def _read(text: str) -> _Hardware:
    """Every line that says something: `available:`, `node N cpus/size/free:`, the distance table."""
    hw = _Hardware()
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        where = f"numactl line {i}"
        m = _AVAILABLE.match(line)
        if m:
            hw.available = parse_int(m.group(1), f"{where}: node count")
            continue
        m = _NODE.match(line)
        if m:
            _node_line(hw, parse_int(m.group(1), f"{where}: node id"), m.group(2), m.group(3), where)
            continue
        if line.startswith("node") and hw.header is None and "distances" not in line:
            hw.header = [parse_int(t, f"{where}: distance header") for t in line.split()[1:]]
            continue
        m = _ROW.match(raw)
        if m and hw.header is not None:
            nid = parse_int(m.group(1), f"{where}: distance row id")
            values = [parse_int(t, f"{where}: distance") for t in m.group(2).split()]
            if len(values) != len(hw.header):
                raise FormatError(f"{where}: distance row {nid} has {len(values)} values for {len(hw.header)} nodes")
            hw.rows[nid] = values
    return hw


def _node_line(hw: _Hardware, nid: int, name: str, value: str, where: str) -> None:
    """A `node N cpus:` line (plain or `--cpu-compress`ed) or a `node N size:` line (`free:` is not used)."""
    if name == "cpus":
        if nid in hw.node_cpus:
            raise FormatError(f"{where}: node {nid} cpus listed twice")
        value = re.sub(r"\(\d+\)\s*$", "", value).strip()  # --cpu-compress appends a count
        text_list = ",".join(value.split()) if "," not in value else value.replace(" ", "")
        hw.node_cpus[nid] = parse_cpulist(text_list, f"{where}: node {nid} cpus").mask
    elif name == "size":
        if value.startswith("<not available>"):
            hw.sizes[nid] = 0
            return
        m = re.match(r"^(\d+)\s*(MB|kB|KB|GB)$", value)
        if not m:
            raise FormatError(f"{where}: node {nid} size {value!r} is not 'N MB'")
        unit = {"MB": 2**20, "kB": 2**10, "KB": 2**10, "GB": 2**30}[m.group(2)]
        hw.sizes[nid] = parse_int(m.group(1), f"{where}: node {nid} size") * unit


def _socket_groups(nodes: list[int], distances: dict[int, dict[int, int]] | None) -> dict[int, int]:
    """Socket id per node: connected groups of nodes at distance below 20, named by their lowest node."""
    parent = {n: n for n in nodes}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    if distances:
        for a in nodes:
            for b in nodes:
                if a != b and distances.get(a, {}).get(b, 99) < 20 and distances.get(b, {}).get(a, 99) < 20:
                    ra, rb = find(a), find(b)
                    parent[max(ra, rb)] = min(ra, rb)
    return {n: find(n) for n in nodes}
