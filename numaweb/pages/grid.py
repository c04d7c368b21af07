"""What the pages draw for a node: its engine state (built by the inventory services, never by a
rule of our own) and the socket → NUMA node → core → thread grid as HTML.

The grid is built here in Python rather than in a template loop: a 512-thread machine is 512 cells,
and a template loop with per-cell tags costs several times more. Every dynamic value goes through
`escape`; the result is marked safe only after that."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from numaweb.inventory import holdings
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, DraDevice, Node
from scheduler_core.errors import EngineError
from scheduler_core.model.cpuset import CPUSet
from scheduler_core.model.node import Node as EngineNode
from scheduler_core.model.quantity import format_bytes
from scheduler_core.model.topology import CPU, Topology

if TYPE_CHECKING:  # the result inventory's check_node_state hands over, named for the annotation only
    from scheduler_core.kubelet.state_check import StateCheck

PALETTE = 12  # owner colours o0..o11 in numaweb.css; the number in the cell tells owners apart too


@dataclass
class Owner:
    """A pod holding CPUs (or memory/devices) on the node; `number` is its legend number."""

    number: int
    pod: str
    containers: list[str] = field(default_factory=list)
    cpus: int = 0
    origin: str = ""
    session_id: int | None = None
    numa: list[int] = field(default_factory=list)  # NUMA nodes holding its CPUs, memory or devices

    @property
    def colour(self) -> int:
        return zlib.crc32(self.pod.encode()) % PALETTE

    @property
    def cpu_text(self) -> str:
        return str(CPUSet(self.cpus)) if self.cpus else "-"

    @property
    def cpu_count(self) -> int:
        return self.cpus.bit_count()


@dataclass
class NodeState:
    """A node row with its engine view: free/reserved CPUs, owners, memory and device use."""

    row: Node
    engine: EngineNode | None
    error: str = ""
    owners: list[Owner] = field(default_factory=list)
    owner_of: dict[int, Owner] = field(default_factory=dict)
    held: int = 0  # CPUs held outside the engine's node (a state file's containers): not free either
    dra: list[DraDevice] = field(default_factory=list)  # its DRA devices, drawn in their NUMA boxes when given

    @property
    def topology(self) -> Topology | None:
        return self.engine.topology if self.engine is not None else None

    @property
    def reserved(self) -> int:
        return self.engine.reserved_cpus.mask if self.engine is not None else 0

    @property
    def free(self) -> int:
        return self.engine.free_cpus & ~self.held if self.engine is not None else 0

    @property
    def free_count(self) -> int:
        return self.free.bit_count()

    def free_per_numa(self) -> list[tuple[int, int, int]]:
        """(NUMA id, free CPUs, CPUs) for each NUMA node."""
        return [] if self.engine is None else numa_usage(self.engine)


def numa_usage(node: EngineNode) -> list[tuple[int, int, int]]:
    """(NUMA id, free CPUs, CPUs) for each NUMA node of an engine node."""
    numa_cpus = node.topology.numa_cpus
    return [(n, free, numa_cpus[n].bit_count()) for n, free in node.free_cpus_per_numa().items()]


def node_state(row: Node, allocations: Iterable[Allocation] | None = None) -> NodeState:
    """Build the engine node from the row and its allocations (the inventory service does it)."""
    allocs = list(row.allocations.all() if allocations is None else allocations)
    try:
        engine = inventory.to_engine(row, allocs)
    except (EngineError, KeyError, TypeError, ValueError) as exc:
        return NodeState(row, None, inventory.topology_error(exc))
    state = NodeState(row, engine)
    by_pod: dict[str, Owner] = {}
    held: dict[str, tuple[list, list]] = {}  # memory and device dicts of each pod's containers
    for a in allocs:
        owner = by_pod.get(a.pod)
        if owner is None:
            owner = by_pod[a.pod] = Owner(0, a.pod, origin=a.origin, session_id=a.session_id)
            held[a.pod] = ([], [])
        if a.container:
            owner.containers.append(a.container)
        owner.cpus |= CPUSet.parse(a.cpus or "").mask
        held[a.pod][0].append(a.memory)
        held[a.pod][1].append(a.devices)
    for pod, owner in by_pod.items():
        owner.numa = holdings.numa_nodes(engine.topology, owner.cpus, *held[pod])
    # legend order: by first CPU held, then by name (pods holding only memory/devices last)
    owners = sorted(by_pod.values(), key=lambda o: ((o.cpus & -o.cpus).bit_length() if o.cpus else 1 << 20, o.pod))
    for i, owner in enumerate(owners, 1):
        owner.number = i
        mask = owner.cpus
        while mask:
            low = mask & -mask
            state.owner_of[low.bit_length() - 1] = owner
            mask ^= low
    state.owners = owners
    return state


def layout(topology: Topology) -> tuple[str, list[tuple[int, list[tuple[int, list[tuple[int, list[CPU]]]]]]]]:
    """The boxes nested as the hardware nests, in id order: ("package", [(socket, [(numa, [(core, [CPU, ...])
    , ...]), ...]), ...]) when NUMA nodes sit inside packages, ("numa", [(numa, [(socket, cores), ...]), ...])
    when packages sit inside NUMA nodes (a NUMA node spanning packages, each package in one NUMA node).
    When neither holds, packages are outside and a NUMA node spanning packages appears in each."""
    numa_sockets: dict[int, set[int]] = {}
    socket_numas: dict[int, set[int]] = {}
    for cpu in topology.cpus:
        numa_sockets.setdefault(cpu.numa, set()).add(cpu.socket)
        socket_numas.setdefault(cpu.socket, set()).add(cpu.numa)
    numa_outside = (any(len(s) > 1 for s in numa_sockets.values())
                    and all(len(n) == 1 for n in socket_numas.values()))
    tree: dict[int, dict[int, dict[int, list[CPU]]]] = {}
    for cpu in topology.cpus:  # sorted by id
        outer, inner = (cpu.numa, cpu.socket) if numa_outside else (cpu.socket, cpu.numa)
        tree.setdefault(outer, {}).setdefault(inner, {}).setdefault(cpu.core, []).append(cpu)
    nested = [(o, [(i, sorted(cores.items())) for i, cores in sorted(inners.items())])
              for o, inners in sorted(tree.items())]
    return ("numa" if numa_outside else "package"), nested


def _span(ids: set[int]) -> str:
    low, high = min(ids), max(ids)
    return f"{low}–{high}" if ids == set(range(low, high + 1)) else ",".join(map(str, sorted(ids)))


def _box(kind: str, ident: int, cpus: int, inner: bool, free: int, compact: bool, spans: dict[int, set[int]]
         ) -> str:
    """A package or NUMA box's opening tag and label, counting the threads of this box (`cpus`, a mask)."""
    css, attr = ("pkg", "socket") if kind == "package" else ("numa", "numa")
    total, nfree = cpus.bit_count(), (cpus & free).bit_count()
    head = (f'<div class="{css}{" inner" if inner else ""}" data-{attr}="{ident}" data-cpus="{total}" '
            f'data-free="{nfree}">')
    if compact:
        return head
    name = f"Package {ident}" if kind == "package" else f"NUMA {ident}"
    if kind == "numa" and inner and len(spans[ident]) > 1:
        name += f" (spans packages {_span(spans[ident])})"
    return f'{head}<span class="lbl">{name} · {nfree}/{total} free</span>'


def render_grid(state: NodeState, highlight: int = 0, compact: bool = False, grid_id: str = "",
                oob: bool = False) -> SafeString:
    """The thread grid. `highlight` is a CPU mask to mark (what-if result, a pod's new CPUs).

    Boxes nest as the hardware nests (`layout`); each box's label counts the threads in that box, so a
    NUMA node spanning packages says so rather than repeating its whole count in each package. Each cell
    carries data-cpu/core/numa/socket/state/owner; the state is also a pattern in CSS and, in the full
    grid, a text mark (owner number, R for reserved) so colour is never the only cue."""
    topo = state.topology
    if topo is None:
        return mark_safe(f'<p class="error">{escape(state.error)}</p>')
    reserved, free, owners = state.reserved, state.free, state.owner_of
    n_threads = len(topo.cpus)
    size = "dense" if n_threads > 128 else ""
    classes = " ".join(c for c in ("grid", "compact" if compact else "full", size) if c)
    attrs = f' id="{escape(grid_id)}"' if grid_id else ""
    if oob:
        attrs += ' hx-swap-oob="true"'
    label = f"{escape(state.row.name)}: {n_threads} CPU threads, {free.bit_count()} free"
    out = [f'<div class="{classes}"{attrs} role="img" aria-label="{label}" data-node="{escape(state.row.name)}" '
           f'data-threads="{n_threads}" data-highlighted="{highlight.bit_count()}">']
    outer_kind, boxes = layout(topo)
    spans: dict[int, set[int]] = {}  # NUMA node → the packages holding its CPUs
    for cpu in topo.cpus:
        spans.setdefault(cpu.numa, set()).add(cpu.socket)
    box = functools.partial(_box, free=free, compact=compact, spans=spans)
    inner_kind = "numa" if outer_kind == "package" else "package"
    dra: dict[int | None, list[DraDevice]] = {}
    if not compact:
        for d in state.dra:
            dra.setdefault(d.numa if d.numa in spans else None, []).append(d)
    by_pod = {o.pod: o for o in state.owners}
    for outer, inners in boxes:
        masks = [sum(1 << c.id for _core, cpus in cores for c in cpus) for _i, cores in inners]
        out.append(box(outer_kind, outer, sum(masks), False))
        if outer_kind == "numa" and outer in dra:
            out.append(_dra_strip(f"NUMA {outer}", dra.pop(outer), by_pod))
        out.append('<div class="boxes">')
        for (inner, cores), mask in zip(inners, masks, strict=True):
            out.append(box(inner_kind, inner, mask, True))
            if inner_kind == "numa" and inner in dra:  # a NUMA node spanning packages: drawn in the first
                out.append(_dra_strip(f"NUMA {inner}", dra.pop(inner), by_pod))
            out.append('<div class="cores">')
            for core, cpus in cores:
                out.append(f'<div class="core" data-core="{core}">')
                for cpu in cpus:
                    out.append(_cell(cpu, reserved, owners, highlight, compact))
                out.append("</div>")
            out.append("</div></div>")
        out.append("</div></div>")
    if None in dra:
        out.append(_dra_strip("NUMA unknown", dra.pop(None), by_pod))
    out.append("</div>")
    return mark_safe("".join(out))  # every dynamic value above went through escape()


def _dra_strip(where: str, devices: list[DraDevice], owners: dict[str, Owner]) -> str:
    """The DRA devices of one NUMA box: each a chip naming the device, its kind and, when a claim of a pod holds
    it, the pod (its legend number and colour when it also holds CPUs here)."""
    chips = []
    for d in devices:
        numa = "unknown" if d.numa is None else d.numa
        title = f"{d.kind} {d.name} ({d.driver}, pool {d.pool}) · NUMA {numa} from {d.numa_source}"
        text: str = escape(d.name)
        classes = f"dra kind-{escape(d.kind)}"
        if d.pod:
            owner = owners.get(d.pod)
            title += f" · held by {d.pod} (claim {d.claim})"
            classes += f" owned tinted o{owner.colour}" if owner else " owned"
            text += f" ▸ {owner.number}" if owner else f" ▸ {escape(d.pod)}"
        else:
            title += " · free"
        chips.append(f'<li class="{classes}" data-dra="{escape(d.driver)}/{escape(d.pool)}/{escape(d.name)}" '
                     f'data-numa="{"" if d.numa is None else d.numa}" data-pod="{escape(d.pod)}" '
                     f'title="{escape(title)}">{text}</li>')
    return f'<ul class="dra-devs" aria-label="DRA devices on {where}">{"".join(chips)}</ul>'


def _cell(cpu: CPU, reserved: int, owners: dict[int, Owner], highlight: int, compact: bool) -> str:
    bit = 1 << cpu.id
    owner = owners.get(cpu.id)
    classes = ["t"]
    if bit & reserved:
        state, mark, who = "reserved", "R", ""
        classes.append("reserved")
    elif owner is not None:
        state, mark, who = "used", str(owner.number), owner.pod
        classes.append(f"used o{owner.colour}")
    else:
        state, mark, who = "free", "", ""
        classes.append("free")
    extra = ""
    if bit & highlight:
        classes.append("hl")
        extra = ' data-highlight="1"'
        if state == "free":
            mark = "+"
    title = f"CPU {cpu.id} · core {cpu.core} · NUMA {cpu.numa} · package {cpu.socket} · {state}"
    if who:
        title += f" by {who}"
    if bit & highlight:
        title += " · highlighted"
    text = "" if compact else escape(mark)
    return (f'<span class="{" ".join(classes)}" data-cpu="{cpu.id}" data-core="{cpu.core}" data-numa="{cpu.numa}" '
            f'data-socket="{cpu.socket}" data-state="{state}" data-owner="{escape(who)}"{extra} '
            f'title="{escape(title)}">{text}</span>')


def render_state_check(row: Node, result: StateCheck) -> SafeString:
    """The thread grid of a state check: each container's actual CPUs as an owner, and every CPU on
    which prediction and state file disagree highlighted (a `scheduler_core.kubelet.state_check.StateCheck`)."""
    try:
        engine = inventory.to_engine(row, ())
    except (EngineError, KeyError, TypeError, ValueError) as exc:
        return render_grid(NodeState(row, None, inventory.topology_error(exc)))
    state = NodeState(row, engine)
    highlight = 0
    for i, c in enumerate(result.containers, 1):
        owner = Owner(i, f"{c.pod}/{c.container}", [c.container], c.actual_cpus.mask, "state file")
        state.owners.append(owner)
        for cpu in c.actual_cpus:
            state.owner_of[cpu] = owner
        state.held |= c.actual_cpus.mask
        if not c.match:
            highlight |= c.actual_cpus.mask ^ c.predicted_cpus.mask
    return render_grid(state, highlight & engine.topology.all_cpus, grid_id="grid")


# -- memory, devices, distances --------------------------------------------------------------------
@dataclass
class Bar:
    label: str
    total: int
    reserved: int
    used: int

    @property
    def free(self) -> int:
        return max(0, self.total - self.reserved - self.used)

    def pct(self, part: int) -> float:
        return round(100 * part / self.total, 1) if self.total else 0.0

    @property
    def reserved_pct(self) -> float:
        return self.pct(self.reserved)

    @property
    def used_pct(self) -> float:
        return self.pct(self.used)

    @property
    def text(self) -> str:
        return (f"{format_bytes(self.used)} used, {format_bytes(self.reserved)} reserved, "
                f"{format_bytes(self.free)} free of {format_bytes(self.total)}")


def memory_bars(state: NodeState) -> list[tuple[int, list[Bar]]]:
    """Per NUMA node: memory then each hugepage size, as capacity / reserved / used."""
    if state.engine is None:
        return []
    engine, out = state.engine, []
    for numa in engine.topology.numa_nodes:
        reserved = engine.kubelet.reserved_memory.get(numa.id, {})
        used = engine.memory_used.get(numa.id, {})
        bars = [Bar("memory", numa.memory, reserved.get("memory", 0), used.get("memory", 0))]
        for size, amount in sorted(numa.hugepages.items()):
            bars.append(Bar(size, amount, reserved.get(size, 0), used.get(size, 0)))
        out.append((numa.id, bars))
    return out


def devices_by_numa(state: NodeState) -> list[tuple[str, list[dict]]]:
    """[(NUMA label, [{id, resource, used, healthy}])]; devices without locality under 'no NUMA'."""
    if state.engine is None:
        return []
    used = state.engine.used_devices
    groups: dict[str, list[dict]] = {}
    for d in state.engine.topology.devices:
        where = "NUMA " + ",".join(map(str, d.numa)) if d.numa else "no NUMA affinity"
        groups.setdefault(where, []).append({"id": d.id, "resource": d.resource, "healthy": d.healthy,
                                             "used": (d.resource, d.id) in used})
    return sorted(groups.items())


def distance_matrix(state: NodeState) -> tuple[list[int], list[tuple[int, list[int]]]]:
    topo = state.topology
    if topo is None or not topo.distances:
        return [], []
    ids = list(topo.numa_ids)
    return ids, [(n, list(topo.distances[n])) for n in ids]
