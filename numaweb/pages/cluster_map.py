"""The cluster map: every node of a cluster as one mark of a server-rendered SVG, grouped by node pool (its
pool label, when the snapshot gave one) and machine shape, coloured by one measure in six bins.

Measures: free CPUs on the node's best NUMA node, free single-NUMA blocks of a size (how many pods of that
many CPUs fit each on one NUMA node), reserved CPUs, a session's TopologyAffinityErrors on the node, or the
node agent's disagreements (the state check of its last report: model against kubelet; a node no agent
reports is drawn apart, `no-agent`). Under every measure a node whose agent has gone silent longer than
NUMAWEB_AGENT_STALE_SECONDS is outlined (`stale`), and a node holding pods whose DRA devices sit off the NUMA nodes
of their pinned CPUs or memory (as the snapshot import judged them) is drawn in one colour of its own (`misaligned`).
Per-node usage comes from `usage` (cached per node generation), so a map of 5,000 nodes reads small tuples;
the page carries each node's id, name, value and bin as data, and a static script draws its <rect> (sizes are CSS;
no inline style or script)."""

from __future__ import annotations

import bisect
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from numaweb.inventory.agent import stale_after
from numaweb.inventory.models import Node, NodeReport, PodAlignment
from numaweb.inventory.pools import pool_of
from numaweb.scheduling.models import Placement

from . import usage

MEASURES = {"best": "free CPUs on the best NUMA node", "blocks": "free single-NUMA blocks of a size",
            "reserved": "reserved CPUs", "errors": "TopologyAffinityErrors of a session",
            "agent": "disagreements of the model with the kubelet (node agents)"}
#: lower bounds of bins 1..5 (bin 0 is below the first)
BINS = {"best": (1, 4, 8, 16, 32), "blocks": (1, 2, 4, 8, 16), "reserved": (1, 2, 4, 8, 16),
        "errors": (1, 2, 5, 10, 20), "agent": (1, 2, 3, 5, 10)}
MARKS = {"stale": "agent silent: stale", "no-agent": "no agent reports this node"}
CELL, GAP, COLUMNS, LABEL_W, ROW_GAP = 8, 1, 130, 190, 6
_PLAIN = frozenset(string.ascii_letters + string.digits + "-._")


@dataclass
class Group:
    title: str
    nodes: list[tuple[int, str, int]]  # (id, name, value)
    #: node id → its extra mark (`stale`, `no-agent`), drawn as a class and said in the tooltip
    marks: dict[int, str] = field(default_factory=dict)
    #: node id → how many misaligned pods it holds (DRA devices off their CPUs' or memory's NUMA nodes)
    misaligned: dict[int, int] = field(default_factory=dict)


def measure_values(cluster_id: int, measure: str, size: int = 1, session_id: int | None = None
                   ) -> tuple[list[Group], int]:
    """The cluster's nodes grouped (pool, then shape, then name) with the measure's value each, and how many
    nodes the engine could not read (they are left out: the node page says why)."""
    nodes = Node.objects.filter(cluster_id=cluster_id).annotate(pool=pool_of(), updated_key=usage.UPDATED_KEY)
    rows = list(nodes.values_list(
        "pk", "name", "generation", "updated_key", "pool", "num_sockets", "num_numa_nodes", "num_cpus"))
    usages = usage.usage_of([(pk, (generation, updated)) for pk, _n, generation, updated, *_rest in rows])
    errors: Mapping[int, int] = {}
    if measure == "errors" and session_id is not None:
        errors = dict(Placement.objects.filter(session_id=session_id, kubelet_reason="TopologyAffinityError")
                      .values_list("node_id").annotate(n=Count("id")).values_list("node_id", "n"))
    reports = dict(NodeReport.objects.filter(node__cluster_id=cluster_id).values_list("node_id", "received_at"))
    disagreements = dict(NodeReport.objects.filter(node__cluster_id=cluster_id).values_list("node_id",
                                                                                               "disagreements"))
    misaligned = dict(PodAlignment.objects.filter(cluster_id=cluster_id, aligned=False, node__isnull=False)
                      .values_list("node_id").annotate(n=Count("id")).values_list("node_id", "n"))
    silent_since = timezone.now() - stale_after()
    groups: dict[tuple, Group] = {}
    unreadable = 0
    for pk, name, _g, _u, pool_name, sockets, numa, cpus in rows:
        use = usages.get(pk)
        if use is None or use.error:
            unreadable += 1
            continue
        if measure == "best":
            value = use.best_numa_free
        elif measure == "blocks":
            value = sum(free // size for _n, free, _t in use.numa)
        elif measure == "reserved":
            value = sum(use.reserved)
        elif measure == "agent":
            value = disagreements.get(pk, 0)
        else:
            value = errors.get(pk, 0)
        shape = f"{cpus} CPUs · {numa} NUMA · {sockets} pkg"
        key = (pool_name or "", cpus, numa, sockets)
        if key not in groups:
            groups[key] = Group(f"{pool_name} · {shape}" if pool_name else shape, [])
        groups[key].nodes.append((pk, name, value))
        if pk in misaligned:
            groups[key].misaligned[pk] = misaligned[pk]
        if pk not in reports:
            if measure == "agent":
                groups[key].marks[pk] = "no-agent"
        elif reports[pk] < silent_since:
            groups[key].marks[pk] = "stale"
    ordered = [groups[k] for k in sorted(groups)]
    for g in ordered:
        g.nodes.sort(key=lambda n: n[1])
    return ordered, unreadable


def bin_of(measure: str, value: int) -> int:
    return bisect.bisect_right(BINS[measure], value)


def legend(measure: str, size: int = 1) -> list[tuple[int, str]]:
    """(bin, label) for the six bins of the measure."""
    lows = BINS[measure]
    unit = {"best": "free CPUs", "blocks": f"blocks of {size} CPUs", "reserved": "reserved CPUs",
            "errors": "errors", "agent": "disagreements"}[measure]
    out = [(0, f"0 {unit}")]
    for i, low in enumerate(lows, 1):
        high = lows[i] - 1 if i < len(lows) else None
        text = f"{low}" if high == low else f"{low}–{high}" if high is not None else f"{low} or more"
        out.append((i, f"{text} {unit}"))
    return out


def render(groups: list[Group], measure: str, node_url: tuple[str, str]) -> tuple[SafeString, dict[str, Any]]:
    """The map's frame and its marks' data: per group a label in the SVG, and for the static script
    (static/js/cluster-map.js) its nodes' ids, names, values, bins (m0..m5) and extra marks, from which it draws
    a <rect> per node in rows of COLUMNS (its id for the click, its name and value as a tooltip). Drawn on the
    server, 5,000 nodes made a 520 KB page; as data, about 120 KB."""
    out, data, y = [], [], 0
    step, lows = CELL + GAP, BINS[measure]
    for g in groups:
        rows = -(-len(g.nodes) // COLUMNS)
        out.append(f'<g class="map-group" data-group="{escape(g.title)}" data-nodes="{len(g.nodes)}">'
                   f'<text class="map-label" x="0" y="{y + CELL}">{escape(g.title)} ({len(g.nodes)})</text></g>')
        data.append({"y": y, "ids": [pk for pk, _n, _v in g.nodes], "names": [name for _pk, name, _v in g.nodes],
                     "values": [value for _pk, _n, value in g.nodes],
                     "bins": "".join(str(bisect.bisect_right(lows, value)) for _pk, _n, value in g.nodes),
                     "marks": {str(pk): mark for pk, mark in g.marks.items()},
                     "misaligned": {str(pk): off for pk, off in g.misaligned.items()}})
        y += max(rows * step, CELL + 4) + ROW_GAP
    width = LABEL_W + COLUMNS * step
    head = (f'<svg class="cluster-map" id="cluster-map" viewBox="0 0 {width} {max(y, 1)}" role="img" '
            f'aria-label="{sum(len(g.nodes) for g in groups)} nodes, coloured by {escape(MEASURES[measure])}" '
            f'data-url-head="{escape(node_url[0])}" data-url-tail="{escape(node_url[1])}" '
            f'xmlns="http://www.w3.org/2000/svg">')
    marks = {"x0": LABEL_W, "step": step, "columns": COLUMNS, "notes": MARKS, "groups": data}
    return mark_safe(head + "".join(out) + "</svg>"), marks  # every dynamic value above is escaped
