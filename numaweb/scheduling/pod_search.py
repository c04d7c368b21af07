"""Find any pod: by pod, job or namespace name, where it is and who put it there.

A pod is known from what it holds (allocation rows, `namespace/name`, per container) and from the jobs
(a job's pods are `<job>-<task>-<i>` in its namespace). The query is a case-insensitive part of the
pod's `namespace/name`, which holds the job's name and the namespace too. Each match says the node and
NUMA nodes holding it (`inventory.holdings`, the rule the node page uses), its CPUs, memory per NUMA
node, devices, who wrote the allocation, and its latest session placement; on a node a node agent reports,
when the kubelet was last seen holding it (`observed_at`), whether the agent is stale, and where the model
disagrees with the kubelet about this pod's containers. Only the matches shown are built and resolved; the rest
are counted, by the database and by arithmetic on the replica counts (a job of 10,000 pods costs the same as a
job of one: 2.4 M pods answer in 0.07 s, where building them took 59 s and 2.3 GB)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from django.db import connection
from django.db.models import Q, QuerySet, Value
from django.db.models.functions import Collate, Concat

from numaweb.inventory import holdings
from numaweb.inventory import services as inventory
from numaweb.inventory.agent import agent_status
from numaweb.inventory.models import Allocation, Node, NodeReport, PodAlignment
from numaweb.jobs.models import Task
from scheduler_core.model.cpuset import CPUSet

from . import pod_totals
from .models import Placement

#: the alignment of a pod that uses no DRA device (the engine's answer for no devices)
ALIGNED = {"aligned": True, "kinds": []}
#: what a pod row shows of its alignment (not the claim changes, which only its page shows)
ROW_FIELDS = ("cluster", "node", "namespace", "name", "aligned", "kinds", "detail", "devices", "claims", "cpu_numa",
              "memory_numa")
#: who wrote an allocation, by its origin (a `scheduled` row without a session was written by hand:
#: the API or the admin site)
WRITERS = {Allocation.IMPORTED: "import", Allocation.REPLAYED: "replay", Allocation.OBSERVED: "agent"}


@dataclass
class PodMatch:
    """One pod (on one node, when it holds something)."""

    uid: str  # namespace/name
    cluster: tuple[int, str] | None = None
    job: tuple[int, str] | None = None  # (id, name)
    task: str = ""
    node: tuple[int, str] | None = None  # (id, name)
    containers: list[str] = field(default_factory=list)
    cpus: int = 0
    memory: list[dict] = field(default_factory=list)  # per container, as stored
    devices: list[dict] = field(default_factory=list)
    writers: set[tuple[str, int | None]] = field(default_factory=set)  # (writer, session id)
    numa: list[int] = field(default_factory=list)
    placement: dict | None = None
    observed_at: datetime | None = None  # the report that showed the kubelet holding it (origin observed)
    agent: dict | None = None  # the node agent: stale, the node's and this pod's disagreements
    alignment: PodAlignment | None = None  # its DRA devices beside its CPUs and memory (none: uses no DRA device)

    @property
    def namespace(self) -> str:
        return self.uid.partition("/")[0]

    @property
    def name(self) -> str:
        return self.uid.partition("/")[2]

    def to_dict(self) -> dict:
        writer = sorted(self.writers, key=lambda w: (w[0], w[1] or 0))
        return {
            "pod": self.uid, "namespace": self.namespace, "name": self.name,
            "cluster": {"id": self.cluster[0], "name": self.cluster[1]} if self.cluster else None,
            "job": {"id": self.job[0], "name": self.job[1], "task": self.task} if self.job else None,
            "node": {"id": self.node[0], "name": self.node[1]} if self.node else None,
            "numa": self.numa, "cpus": str(CPUSet(self.cpus)), "cpu_count": self.cpus.bit_count(),
            "containers": self.containers,
            "memory": holdings.memory_per_numa(self.memory), "devices": holdings.devices_of(self.devices),
            "written_by": [{"writer": w, "session": s} for w, s in writer],
            "last_placement": self.placement,
            "observed_at": self.observed_at.isoformat() if self.observed_at else None, "agent": self.agent,
            "alignment": self.alignment.to_dict() if self.alignment else dict(ALIGNED),
            "dra": None if self.alignment is None else {
                "id": self.alignment.pk, "detail": self.alignment.detail, "devices": self.alignment.devices,
                "claims": self.alignment.claims, "cpu_numa": self.alignment.cpu_numa,
                "memory_numa": self.alignment.memory_numa},
        }


def writer_of(origin: str, session_id: int | None) -> str:
    if origin == Allocation.SCHEDULED:
        return "session" if session_id else "admin"
    return WRITERS.get(origin, origin)


def find_pods(query: str, cluster: int | None = None, limit: int = 50) -> tuple[int, list[PodMatch]]:
    """(how many pods match, the first `limit` of them resolved), ordered by namespace/name then node.

    Answered from indexes, at a cost that does not grow with the replicas: the allocations are counted and
    paged by the database; a job's pods are its tasks' name prefixes and replica counts, whose matching
    indexes are counted and listed in name order by `_Indexes` without building the others. With no query
    (every pod), the job pods are counted by the database and only the tasks the page reaches are read."""
    needle = query.strip().lower()
    held = Allocation.objects.filter(pod__icontains=needle)
    if cluster is not None:
        held = held.filter(cluster_id=cluster)
    count = held.order_by().values("pod", "node_id").distinct().count()
    keys = list(held.annotate(pod_key=_bytewise("pod"), node_key=_bytewise("node__name"))
                .values_list("pod_key", "node_key", "node_id").distinct()
                .order_by("pod_key", "node_key", "node_id")[:limit])
    if needle:
        groups = _job_groups(needle, cluster)
        count += sum(g.indexes.count() for g in groups.values()) - _held_job_pods(needle, held, groups)
        shown = _page(keys, sorted(groups.values(), key=lambda g: g.prefix), limit)
    else:  # every pod: the groups the page reaches, read in name order (a dict filled as they are read)
        groups = {}
        count += pod_totals.job_pods(cluster) - pod_totals.held_job_pods(held, cluster)
        shown = _page(keys, _groups_in_order(pod_totals.tasks_of(cluster), groups, limit + 16), limit)
    _fill_held([m for m in shown if m.node is not None], held, needle, groups)
    _resolve_numa(shown)
    _attach_placements(shown, cluster)
    _attach_agents(shown)
    _attach_alignments(shown)
    return count, shown


def find_aligned(cluster: int | None, misaligned: bool, query: str = "", limit: int = 50
                 ) -> tuple[int, list[PodMatch]]:
    """The pods using DRA devices whose alignment (stored by the import) is off (`misaligned`) or not, whose
    namespace/name contains `query`: how many, and the first `limit` resolved as `find_pods` resolves its own,
    by namespace/name."""
    rows = PodAlignment.objects.filter(aligned=not misaligned).select_related("node", "cluster").only(
        *ROW_FIELDS, "cluster__name", "node__name")
    if cluster is not None:
        rows = rows.filter(cluster_id=cluster)
    if query:
        rows = rows.annotate(pod_name=Concat("namespace", Value("/"), "name")).filter(pod_name__icontains=query)
    shown = [PodMatch(a.pod, (a.cluster_id, a.cluster.name), node=(a.node.pk, a.node.name) if a.node else None,
                      alignment=a) for a in rows.order_by("namespace", "name")[:limit]]
    held = Allocation.objects.filter(cluster_id=cluster) if cluster is not None else Allocation.objects.all()
    _fill_held([m for m in shown if m.node is not None], held, "", {})
    _resolve_numa(shown)
    _attach_placements(shown, cluster)
    _attach_agents(shown)
    return rows.count(), shown


def _attach_alignments(matches: Iterable[PodMatch]) -> None:
    """Each held pod's stored DRA alignment in its cluster (none for a pod that uses no DRA device)."""
    held = [m for m in matches if m.cluster is not None]
    if not held:
        return
    found = {(a.cluster_id, a.namespace, a.name): a for a in PodAlignment.objects.only(*ROW_FIELDS).filter(
        cluster_id__in={m.cluster[0] for m in held if m.cluster is not None},
        namespace__in={m.namespace for m in held}, name__in={m.name for m in held})}
    for m in held:
        if m.cluster is not None:
            m.alignment = found.get((m.cluster[0], m.namespace, m.name))


def _attach_agents(matches: Iterable[PodMatch]) -> None:
    """For a pod on a node an agent reports: is the agent stale, how many disagreements on the node, and the
    state check's disagreeing containers of this pod."""
    held = [m for m in matches if m.node is not None]
    reports = NodeReport.objects.in_bulk({m.node[0] for m in held if m.node is not None}, field_name="node_id")
    for m in held:
        status = agent_status(reports.get(m.node[0])) if m.node is not None else None
        if status is None:
            continue
        mine = [c for c in status["check"]["containers"] if c.get("pod") == m.uid]
        m.agent = {"stale": status["stale"], "reported_at": status["reported_at"].isoformat(),
                   "node_disagreements": status["disagreements"], "disagreements": mine}


def _bytewise(field: str) -> Collate:
    """The column compared byte by byte (code point order, as Python sorts strings), whatever the database's
    default collation: the database's page and the job pods listed in Python interleave correctly."""
    return Collate(field, "C" if connection.vendor == "postgresql" else "BINARY")


@dataclass
class _Group:
    """The tasks whose pods share one name prefix `<namespace>/<job>-<task>-` (one, unless two jobs' and
    tasks' names join the same way), in task order: replica `i` is the last one's with `i < replicas`."""

    prefix: str
    tasks: list[tuple[int, tuple[int, str], tuple[int, str], str]]  # (replicas, cluster, (job id, name), task)
    indexes: _Indexes

    def owner(self, index: int) -> PodMatch:
        _replicas, cluster, job, task = next(t for t in reversed(self.tasks) if index < t[0])
        return PodMatch(f"{self.prefix}{index}", cluster, job=job, task=task)


def _job_groups(needle: str, cluster: int | None) -> dict[str, _Group]:
    """The job pods (of the cluster, when one is asked for) whose namespace/name contains the needle, by name
    prefix: one row per task read, no pod built."""
    # a match reaching into the pod's index is the needle's non-digit head ending the prefix (which ends in
    # "-") and its trailing digits starting the index, or, with no head, digits anywhere in the index
    head = needle.rstrip("0123456789")
    digits = needle[len(head):]
    tasks = pod_totals.tasks_of(cluster)
    if head or not digits:  # the database keeps the tasks whose prefix can match (all 22,000 were read before)
        tasks = tasks.annotate(prefix=pod_totals.PREFIX).filter(
            Q(prefix__icontains=needle) | Q(prefix__iendswith=head) if digits else Q(prefix__icontains=needle))
    found: dict[str, list[tuple[int, tuple[int, str], tuple[int, str], str]]] = {}
    for job_id, job, namespace, task, replicas, cluster_id, cluster_name in tasks.values_list(
            "job_id", "job__name", "job__namespace", "name", "replicas", "job__cluster_id",
            "job__cluster__name").order_by("job_id", "id"):
        found.setdefault(f"{namespace}/{job}-{task}-", []).append(
            (replicas, (cluster_id, cluster_name), (job_id, job), task))
    groups = {}
    for prefix, members in found.items():
        low = prefix.lower()
        replicas = max(m[0] for m in members)
        if needle in low:
            indexes = _Indexes(replicas, "", anchored=False)
        elif digits and (not head or low.endswith(head)):
            indexes = _Indexes(replicas, digits, anchored=bool(head))
        else:
            continue
        groups[prefix] = _Group(prefix, members, indexes)
    return groups


def _job_pod(uid: str, groups: Mapping[str, _Group]) -> tuple[_Group, int] | None:
    """The group and index of a job's pod named `uid` (None: not a pod of these groups)."""
    prefix = uid.rstrip("0123456789")
    text = uid[len(prefix):]
    group = groups.get(prefix)
    if group is None or not text or (text[0] == "0" and text != "0") or int(text) >= group.indexes.n:
        return None
    return group, int(text)


def _held_job_pods(needle: str, held: QuerySet[Allocation], groups: Mapping[str, _Group]) -> int:
    """How many of the matching job pods hold something (they are counted once, as held), streamed: one
    name per held pod, none per pending one."""
    if not groups:
        return 0
    return sum(1 for uid in held.order_by().values_list("pod", flat=True).distinct().iterator(chunk_size=2000)
               if needle in uid.lower() and _job_pod(uid, groups) is not None)


def _page(keys: list[tuple[str, str, int]], waiting: Iterable[_Group], limit: int) -> list[PodMatch]:
    """The first `limit` matches: the held pods' page (by pod, then node) merged with each group's pods in
    name order, less those that hold something. `keys` is the held pods' first `limit` (pod, node, node id):
    a pending pod reached before the page is full sorts before the page's last held pod, so the page says
    whether it is held. `waiting` gives the groups in prefix order; a group's pods all start with its prefix,
    so a group joins the merge only once the merge reaches its prefix: a page visits the groups before its
    end, not every job of the cluster (and takes no more of `waiting` than that)."""
    held_uids = {uid for uid, _node, _id in keys}
    groups = iter(waiting)
    following = next(groups, None)
    heap: list[tuple[tuple[str, str, int], int, _Group | None, Iterator[tuple[str, str, int, _Group | None]]]] = []

    def push(stream: Iterator[tuple[str, str, int, _Group | None]], order: int) -> None:
        for uid, node, node_id, group in stream:
            heapq.heappush(heap, ((uid, node, node_id), order, group, stream))
            return

    push(iter([(uid, node, node_id, None) for uid, node, node_id in keys]), 0)
    joined = 0
    shown: list[PodMatch] = []
    while len(shown) < limit:
        while following is not None and (not heap or following.prefix <= heap[0][0][0]):
            joined += 1
            push(_pending(following), joined)
            following = next(groups, None)
        if not heap:
            break
        (uid, node, node_id), order, group, stream = heapq.heappop(heap)
        push(stream, order)
        if group is None:
            shown.append(PodMatch(uid, node=(node_id, node)))
        elif uid not in held_uids:
            shown.append(group.owner(int(uid[len(group.prefix):])))
    return shown


def _groups_in_order(tasks: QuerySet[Task], into: dict[str, _Group], batch: int) -> Iterator[_Group]:
    """Every task's group (all its pods match), in prefix order, read from the database a batch at a time
    (doubling) as the page asks for the next one; each group yielded is whole and is added to `into`."""
    rows = tasks.annotate(prefix=pod_totals.PREFIX, key=_bytewise("prefix")).order_by("key", "job_id", "id")
    rows_of = rows.values_list("prefix", "replicas", "job__cluster_id", "job__cluster__name", "job_id", "job__name",
                               "name")
    start, current = 0, None
    while True:
        chunk = list(rows_of[start:start + batch])
        start += len(chunk)
        for prefix, replicas, cluster_id, cluster_name, job_id, job, task in chunk:
            if current is not None and current.prefix != prefix:
                yield _whole(current, into)
                current = None
            if current is None:
                current = _Group(prefix, [], _Indexes(0, "", anchored=False))
            current.tasks.append((replicas, (cluster_id, cluster_name), (job_id, job), task))
        if len(chunk) < batch:
            break
        batch *= 2
    if current is not None:
        yield _whole(current, into)


def _whole(group: _Group, into: dict[str, _Group]) -> _Group:
    """The group with all its tasks read: every index below its largest replica count matches."""
    group.indexes = _Indexes(max(t[0] for t in group.tasks), "", anchored=False)
    into[group.prefix] = group
    return group


def _pending(group: _Group) -> Iterator[tuple[str, str, int, _Group]]:
    for i in group.indexes.ordered():
        yield f"{group.prefix}{i}", "", 0, group


def _fill_held(matches: list[PodMatch], held: QuerySet[Allocation], needle: str,
               groups: Mapping[str, _Group]) -> None:
    """What each held pod of the page holds on its node (its rows only), and its job and task when its name is
    one of a job's pods."""
    by_key = {(m.uid, m.node[0]): m for m in matches if m.node is not None}
    rows = held.filter(pod__in={uid for uid, _node in by_key}, node_id__in={node for _uid, node in by_key})
    for (uid, container, cpus, memory, devices, origin, session, node_id, cluster_id, cluster_name, job_id,
         job_name, observed_at) in rows.values_list(
            "pod", "container", "cpus", "memory", "devices", "origin", "session_id", "node_id", "cluster_id",
            "cluster__name", "job_id", "job__name", "observed_at").order_by("pod", "node_id", "id"):
        match = by_key.get((uid, node_id))
        if match is None:
            continue
        match.cluster = (cluster_id, cluster_name)
        if job_id is not None:
            match.job = (job_id, job_name)
        if container:
            match.containers.append(container)
        match.cpus |= CPUSet.parse(cpus or "").mask
        match.memory.append(memory)
        match.devices.append(devices)
        match.writers.add((writer_of(origin, session), session))
        if observed_at is not None:
            match.observed_at = max(observed_at, match.observed_at or observed_at)
    for m in matches:  # a job's pod: its job and task from the job (as when it holds nothing)
        if needle in m.uid.lower() and (found := _job_pod(m.uid, groups)) is not None:
            owner = found[0].owner(found[1])
            m.job, m.task = owner.job, owner.task


class _Indexes:
    """The replica indexes `0 <= i < n` whose decimal text contains `digits` (`anchored`: starts with them;
    no digits: every index), counted and listed in the order of their text ("0", "1", "10", "100", ...)
    without visiting the others. The text is read by an automaton over the digits (Knuth-Morris-Pratt's for
    "contains"), and the indexes under a text prefix are counted digit by digit against `n`'s digits: a count
    costs O(len(str(n)) * 10) once the per-state tables are filled."""

    #: the automaton of no digits: one state, found from the start (every index matches)
    _EVERY: ClassVar[list[list[int]]] = [[0] * 10]

    def __init__(self, n: int, digits: str, anchored: bool) -> None:
        self.n, self.limit = n, str(n)
        m = self.final = len(digits)
        self._free: dict[tuple[int, int], int] = {}
        self.step: list[list[int]] = []
        if not digits:  # shared, not built per job: a search without digits reads every job's tasks
            self.step = self._EVERY
            return
        failure = [0] * max(m, 1)  # the longest proper border of digits[:k + 1]
        for k in range(1, m):
            b = failure[k - 1]
            while b and digits[k] != digits[b]:
                b = failure[b - 1]
            failure[k] = b + 1 if digits[k] == digits[b] else 0
        for state in range(m + 1):
            row = []
            for d in "0123456789":
                if state == m:
                    row.append(m)  # found: stays found
                elif digits[state] == d:
                    row.append(state + 1)
                elif anchored:
                    row.append(m + 1)  # a dead state: the text does not start with the digits
                else:
                    row.append(self.step[failure[state - 1]][int(d)] if state else 0)
            self.step.append(row)
        if anchored:
            self.step.append([m + 1] * 10)

    def free(self, state: int, length: int) -> int:
        """How many texts of `length` digits, read from `state`, end found."""
        if length == 0:
            return int(state == self.final)
        key = (state, length)
        if key not in self._free:
            self._free[key] = sum(self.free(nxt, length - 1) for nxt in self.step[state])
        return self._free[key]

    def under(self, text: str, state: int) -> int:
        """How many matching indexes below n have a text starting with `text` (read up to `state`)."""
        if text[0] == "0":
            return int(text == "0" and self.n > 0 and state == self.final)
        limit, size = self.limit, len(text)
        if size > len(limit):
            return 0
        total = sum(self.free(state, extra) for extra in range(len(limit) - size))  # shorter than n
        head = limit[:size]
        if text < head:
            total += self.free(state, len(limit) - size)
        elif text == head:  # as long as n, and below it digit by digit
            for pos in range(size, len(limit)):
                top = int(limit[pos])
                total += sum(self.free(self.step[state][d], len(limit) - pos - 1) for d in range(top))
                state = self.step[state][top]
        return total

    def count(self) -> int:
        if not self.final:  # no digits: every index matches (at 22,000 jobs, reading them cost seconds)
            return self.n
        return sum(self.under(str(d), self.step[0][d]) for d in range(10))

    def ordered(self) -> Iterator[int]:
        """The matching indexes in the order of their text, each found in O(len(str(n))) counts."""
        stack = [(str(d), self.step[0][d]) for d in range(9, -1, -1)]
        while stack:
            text, state = stack.pop()
            if not self.under(text, state):
                continue
            if state == self.final and int(text) < self.n:
                yield int(text)
            if text != "0":
                stack.extend((text + str(d), self.step[state][d]) for d in range(9, -1, -1))


def _resolve_numa(matches: Iterable[PodMatch]) -> None:
    """The NUMA nodes of each holding, from its node's topology (cached by shape)."""
    held = [(m, m.node[0]) for m in matches if m.node is not None]
    nodes = Node.objects.only("pk", "fingerprint").in_bulk({node_id for _m, node_id in held})
    for m, node_id in held:
        m.numa = holdings.numa_nodes(inventory.topology_of(nodes[node_id]), m.cpus, m.memory, m.devices)


def _attach_placements(matches: list[PodMatch], cluster: int | None) -> None:
    """Each pod's latest placement (in its cluster when it holds something there, or the one asked for)."""
    if not matches:
        return
    rows = Placement.objects.filter(pod__in={m.name for m in matches})
    if cluster is not None:
        rows = rows.filter(session__cluster_id=cluster)
    latest: dict[tuple[str, str, int], Mapping[str, object]] = {}
    newest: dict[tuple[str, str], Mapping[str, object]] = {}
    for row in rows.values("session_id", "session__cluster_id", "index", "namespace", "pod", "node_name", "cpus",
                           "predicted", "admitted", "status").order_by("session_id"):
        key = (row["namespace"], row["pod"])
        latest[(*key, row["session__cluster_id"])] = newest[key] = row
    for m in matches:
        key = (m.namespace, m.name)
        last = latest.get((*key, m.cluster[0])) if m.cluster else newest.get(key)
        if last is not None:
            m.placement = {"session": last["session_id"], "index": last["index"], "node": last["node_name"] or None,
                           "cpus": last["cpus"], "predicted": last["predicted"], "admitted": last["admitted"],
                           "status": last["status"]}
