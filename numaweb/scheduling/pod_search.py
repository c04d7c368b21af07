"""Find any pod: by pod, job or namespace name, where it is and who put it there.

A pod is known from what it holds (allocation rows, `namespace/name`, per container) and from the jobs
(a job's pods are `<job>-<task>-<i>` in its namespace). The query is a case-insensitive part of the
pod's `namespace/name`, which holds the job's name and the namespace too. Each match says the node and
NUMA nodes holding it (`inventory.holdings`, the rule the node page uses), its CPUs, memory per NUMA
node, devices, who wrote the allocation, and its latest session placement; on a node a node agent reports,
when the kubelet was last seen holding it (`observed_at`), whether the agent is stale, and where the model
disagrees with the kubelet about this pod's containers. Only the matches shown are resolved; the rest are
counted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from numaweb.inventory import holdings
from numaweb.inventory import services as inventory
from numaweb.inventory.agent import agent_status
from numaweb.inventory.models import Allocation, Node, NodeReport
from numaweb.jobs.models import Task
from scheduler_core.model.cpuset import CPUSet

from .models import Placement

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
        }


def writer_of(origin: str, session_id: int | None) -> str:
    if origin == Allocation.SCHEDULED:
        return "session" if session_id else "admin"
    return WRITERS.get(origin, origin)


def find_pods(query: str, cluster: int | None = None, limit: int = 50) -> tuple[int, list[PodMatch]]:
    """(how many pods match, the first `limit` of them resolved), ordered by namespace/name then node."""
    needle = query.strip().lower()
    held = _held(needle, cluster)
    of_jobs = {m.uid: m for m in _job_pods(needle, cluster)}
    for m in held:  # a job's pod that holds something: its job and task from the job
        if (pod := of_jobs.get(m.uid)) is not None:
            m.job, m.task = pod.job, pod.task
    seen = {m.uid for m in held}
    pending = [m for uid, m in of_jobs.items() if uid not in seen]
    matches = sorted(held + pending, key=lambda m: (m.uid, m.node[1] if m.node else ""))
    shown = matches[:limit]
    _resolve_numa(shown)
    _attach_placements(shown, cluster)
    _attach_agents(shown)
    return len(matches), shown


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


def _held(needle: str, cluster: int | None) -> list[PodMatch]:
    rows = Allocation.objects.filter(pod__icontains=needle)
    if cluster is not None:
        rows = rows.filter(cluster_id=cluster)
    by_key: dict[tuple[str, int], PodMatch] = {}
    for (uid, container, cpus, memory, devices, origin, session, node_id, node_name, cluster_id, cluster_name,
         job_id, job_name, observed_at) in rows.values_list(
            "pod", "container", "cpus", "memory", "devices", "origin", "session_id", "node_id", "node__name",
            "cluster_id", "cluster__name", "job_id", "job__name", "observed_at").order_by("pod", "node_id", "id"):
        match = by_key.get((uid, node_id))
        if match is None:
            match = by_key[uid, node_id] = PodMatch(uid, (cluster_id, cluster_name), node=(node_id, node_name))
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
    return list(by_key.values())


def _job_pods(needle: str, cluster: int | None) -> list[PodMatch]:
    """Every pod of every job (of the cluster, when one is asked for) whose namespace/name contains the
    needle (names built, not stored)."""
    # a match reaching into the pod's index is the needle's non-digit head ending the prefix (which ends in
    # "-") and its trailing digits starting the index, or, with no head, digits anywhere in the index
    head = needle.rstrip("0123456789")
    digits = needle[len(head):]
    out: list[PodMatch] = []
    tasks = Task.objects.all() if cluster is None else Task.objects.filter(job__cluster_id=cluster)
    for job_id, job, namespace, task, replicas, cluster_id, cluster_name in tasks.values_list(
            "job_id", "job__name", "job__namespace", "name", "replicas", "job__cluster_id",
            "job__cluster__name").order_by("job_id", "id"):
        prefix = f"{namespace}/{job}-{task}-"
        low = prefix.lower()
        if needle in low:
            indexes: Iterable[int] = range(replicas)
        elif digits and (not head or low.endswith(head)):
            indexes = [i for i in range(replicas) if (str(i).startswith(digits) if head else digits in str(i))]
        else:
            continue
        out.extend(PodMatch(f"{prefix}{i}", (cluster_id, cluster_name), job=(job_id, job), task=task)
                   for i in indexes)
    return out


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
