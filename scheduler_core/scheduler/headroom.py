"""Headroom: how many more pods of one shape a session of a profile still places on a cluster, per node.

- `Shape.parse(cpu="4", memory="8Gi", devices={"nvidia.com/gpu": "1"}, policy="single-numa-node")`:
  one pod's requests (limits equal to requests, so Guaranteed when cpu and memory are set) and the
  task topology policy it carries.
- `headroom(cluster, shape, profile, max_pods=None, seconds=None)` → `{"total", "rejected", "at_least",
  "nodes": [{"node", "count", "rejected", "at_least"}]}`: how many more pods of `shape` a session of `profile`
  places on `cluster` as it is (real `run_session`s on copies, so exactly what a session would do; see
  `headroom`), at most `max_pods` of them tried and within `seconds` (beyond: "at least" the total). Placed pods
  always form a prefix of the job: once one pod of a shape finds no node, the state is unchanged and
  so does every later one; hence a session of `headroom + k` such pods places exactly `headroom`.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from ..errors import PolicyError, RequestError
from ..model.jobs import Job, Task
from ..model.kubelet_config import TOPOLOGY_POLICIES
from ..model.pods import Container, Pod, is_device_resource
from ..model.quantity import count, cpu_milli, format_bytes
from .cluster import Cluster, Request, TallyKey
from .profiles import Profile, get_profile
from .session import run_session

HEADROOM_NAMESPACE = "numaweb-headroom"  # its pods' uids never collide with real pods'
#: the smallest CPU request of a shape: one whole CPU, the least the static CPU Manager pins. Below it a pod only
#: takes a slice of the shared pool and its headroom is a division (a 1m shape "fits" 1,000 times per CPU), not
#: a question of placement worth hundreds of thousands of simulated pods.
MIN_SHAPE_CPU_MILLI = 1000


class ShapeDict(TypedDict):
    cpu: str
    memory: str | None
    devices: dict[str, int]
    policy: str | None


class NodeHeadroom(TypedDict):
    node: str
    count: int
    rejected: int
    at_least: bool


class HeadroomSummary(TypedDict):
    profile: str
    shape: ShapeDict
    total: int
    rejected: int
    at_least: bool
    stopped: str | None
    bound: int
    sessions: int
    engine_s: float


class Headroom(HeadroomSummary):
    nodes: list[NodeHeadroom]


@dataclass(frozen=True)
class Shape:
    """One pod's requests: CPU millicores, memory bytes, devices per resource; `policy` is the task
    topology policy its pods carry (Volcano's; None for none)."""

    cpu_milli: int
    memory: int = 0
    devices: tuple[tuple[str, int], ...] = ()
    policy: str | None = None

    def __post_init__(self) -> None:
        if self.cpu_milli <= 0:
            raise RequestError("cpu: a pod shape needs a CPU request above zero")
        if self.cpu_milli < MIN_SHAPE_CPU_MILLI:
            raise RequestError(f"cpu: a pod shape asks for at least one whole CPU (1, the smallest request the "
                               f"kubelet's static CPU Manager pins), not {self.cpu_milli}m")
        if self.policy is not None and self.policy not in TOPOLOGY_POLICIES:
            raise PolicyError(f"policy: unknown topology policy {self.policy!r}; expected one of: "
                              f"{', '.join(TOPOLOGY_POLICIES)}")

    @classmethod
    def parse(cls, cpu: object, memory: object = None, devices: Mapping[str, object] | str | None = None,
              policy: str | None = None) -> Shape:
        """Quantities as Kubernetes writes them (`4`, `500m`, `8Gi`); devices as a mapping or the
        text `nvidia.com/gpu=1,example.com/nic=2`. Errors name the field."""
        if cpu in (None, ""):
            raise RequestError("cpu: a pod shape needs a CPU request (e.g. 4 or 500m)")
        milli = cpu_milli(cpu, "cpu")
        mem = count(memory, "memory") if memory not in (None, "") else 0
        if isinstance(devices, str):
            pairs = {}
            for item in filter(None, (p.strip() for p in devices.split(","))):
                resource, sep, quantity = item.partition("=")
                if not sep or not resource.strip():
                    raise RequestError(f"devices: {item!r} is not resource=count (e.g. nvidia.com/gpu=1)")
                pairs[resource.strip()] = quantity.strip()
            devices = pairs
        parsed = []
        for name, amount in sorted((devices or {}).items()):
            if not is_device_resource(name):
                raise RequestError(f"devices: {name!r} is not a device resource (cpu and memory have their own fields)")
            n = count(amount, f"devices: {name}")
            if n:
                parsed.append((name, n))
        return cls(milli, mem, tuple(parsed), policy or None)

    def pod(self) -> Pod:
        return Pod("shape", (Container.guaranteed("main", self.cpu_milli, self.memory,
                                                  devices=dict(self.devices)),))

    def to_dict(self) -> ShapeDict:
        cpu = str(self.cpu_milli // 1000) if self.cpu_milli % 1000 == 0 else f"{self.cpu_milli}m"
        return {"cpu": cpu, "memory": format_bytes(self.memory) if self.memory else None,
                "devices": dict(self.devices), "policy": self.policy}


def headroom(cluster: Cluster, shape: Shape, profile: str | Profile = "aligned", *, max_pods: int | None = None,
             seconds: float | None = None) -> Headroom:
    """Pods of `shape` a session of `profile` (a name or a Profile with its options) would still place
    on `cluster` (left unchanged), per node.

    A session of identical pods changes only the node it places on, and keeps placing while any node
    passes, so each node ends with as many pods as a session over that node alone places, whatever
    the order. Nodes in the same state (shape, settings, allocations, scheduler tally) therefore need
    one real session each, over one of them: a job of as many replicas as resource fit allows there.
    The sum is what one session over the whole cluster places (tests/scheduler/test_compare.py checks it
    against such a session, for every profile). `rejected` counts those the kubelet would then refuse
    (placed by the scheduler, as a session counts them, but holding nothing); always 0 for `aligned`.

    The work is bounded: the sessions try at most `max_pods` pods in all, and no new session starts
    after `seconds`. A node whose session was cut short (or never run) counts what was placed and says
    `at_least`; so does the answer, with `stopped` naming the bound that was reached."""
    try:
        chosen = get_profile(profile)
    except PolicyError as exc:
        raise PolicyError(f"profile: {exc}") from None
    started = time.perf_counter()
    pod = shape.pod()
    request = Request.of(pod)
    budget = _Budget(max_pods, seconds, started)
    per_node: dict[str, tuple[int, int, bool]] = {}
    bound = sessions = 0
    for members in _state_groups(cluster).values():
        fits = cluster.fit_count(members[0], request)
        bound += fits * len(members)
        placed = rejected = 0
        cut = False
        replicas = budget.take(fits) if fits else 0
        if fits and not replicas:
            cut = True  # a bound was reached before this node's session: what it holds is not counted
        elif replicas:
            sessions += 1
            placed, rejected = _one_node_session(cluster, members[0], shape, pod, replicas, chosen)
            cut = replicas < fits and placed == replicas  # fewer placed than tried: the node is full, the count exact
        for name in members:
            per_node[name] = (placed, rejected, cut)
    at_least = any(cut for _c, _r, cut in per_node.values())
    return {"profile": chosen.name, "shape": shape.to_dict(), "total": sum(c for c, _r, _a in per_node.values()),
            "rejected": sum(r for _c, r, _a in per_node.values()), "at_least": at_least,
            "stopped": budget.stopped if at_least else None, "bound": bound, "sessions": sessions,
            "engine_s": time.perf_counter() - started,
            "nodes": [{"node": name, "count": c, "rejected": r, "at_least": a}
                      for name, (c, r, a) in sorted(per_node.items())]}


class _Budget:
    """What is left of headroom's bounds: pods to try (None: no limit) and time; `stopped` names the
    bound reached, if any (after it, no session starts)."""

    def __init__(self, max_pods: int | None, seconds: float | None, started: float) -> None:
        self.max_pods, self.left, self.seconds, self.started = max_pods, max_pods, seconds, started
        self.stopped: str | None = None

    def take(self, fits: int) -> int:
        """How many of the `fits` pods a node takes the next session may try: 0 once a bound is reached."""
        if self.stopped is None and self.seconds is not None and time.perf_counter() - self.started > self.seconds:
            self.stopped = f"time budget of {self.seconds:g} s"
        if self.stopped is None and self.left is not None and self.left <= 0:
            self.stopped = f"limit of {self.max_pods} pods tried"
        if self.stopped is not None:
            return 0
        replicas = fits if self.left is None else min(fits, self.left)
        if replicas < fits:
            self.stopped = f"limit of {self.max_pods} pods tried"
        if self.left is not None:
            self.left -= replicas
        return replicas


def _state_groups(cluster: Cluster) -> dict[tuple[Hashable, TallyKey], list[str]]:
    """Node names (sorted) by node state and scheduler tally: one session answers for each group."""
    groups: dict[tuple[Hashable, TallyKey], list[str]] = {}
    for name in sorted(cluster.nodes):
        groups.setdefault((cluster.nodes[name].state_key(), cluster.tally[name].key()), []).append(name)
    return groups


def _one_node_session(cluster: Cluster, name: str, shape: Shape, pod: Pod, replicas: int,
                      profile: Profile) -> tuple[int, int]:
    """(placed, rejected by the kubelet) of a session of `replicas` pods of `shape` over node `name` alone."""
    job = Job("headroom", (Task("pod", pod, replicas, shape.policy),), min_available=1, namespace=HEADROOM_NAMESPACE)
    counts = run_session(cluster.copy([name]), [job], profile=profile, explain_names=0, explain_groups=0).counts
    return counts["placed"], counts["topology_affinity_errors"] + counts["admission_errors"]
