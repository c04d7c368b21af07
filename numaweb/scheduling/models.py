"""Scheduling sessions and their results, stored as normalized rows so that pages load only what they show.

A session's explanation is not one document. Per session: its jobs' gang outcomes (`SessionJob`), the
verdicts its pods produced (`Verdict`: outcome, reason, NUMA mask and CPUs as ints, the profile's
evidence), and three interned tables that pods share by reference: node name lists (`NodeNames`),
verdict groups (`VerdictGroup`: verdict, score, node count, names) and JSON details that repeat
across verdicts and pods (`Detail`: a container's CPU hints, a Topology Manager decision list). Per pod
one `Placement` row: where it went, predicted/admitted, CPUs, NUMA masks as ints, and its groups as a
short list of references, every group in the engine's order: the reader ranks them and keeps the first
`explain_groups` (ranking them at commit was half of a 10,000-pod commit). References are per-session
integers (`ref`), not foreign keys, so a commit writes every table with bulk inserts and a page fetches
just the refs it displays.

`results.py` reads them (a pod's record, verdicts by ref, the streamed `numaweb.session` export);
`store.py` writes them from the engine's `SessionResult`."""

from __future__ import annotations

from django.db import models

from numaweb.access.history import audited
from numaweb.inventory.models import Cluster, Node
from numaweb.jobs.models import Job
from numaweb.worker.models import Run
from scheduler_core.scheduler.explain import PodStatus as EnginePodStatus
from scheduler_core.scheduler.profiles import PROFILES as ENGINE_PROFILES


class PodStatus(models.TextChoices):
    """A pod's outcome in a session: the engine's `scheduler_core.PodStatus`, value for value (a test holds
    these to the engine's; `skipped` is set by the commit, for a pod that already held resources)."""

    ADMITTED = EnginePodStatus.ADMITTED.value, "admitted"
    REJECTED = EnginePodStatus.REJECTED.value, "rejected"
    UNSCHEDULABLE = EnginePodStatus.UNSCHEDULABLE.value, "unschedulable"
    ROLLED_BACK = EnginePodStatus.ROLLED_BACK.value, "rolled_back"
    SKIPPED = EnginePodStatus.SKIPPED.value, "skipped"


class SchedulingSession(Run):
    """A scheduling session: a run (numaweb.worker.models.Run's columns) with its own heartbeat, whose outcome is
    its placements and allocations."""

    PROFILES = tuple(ENGINE_PROFILES)  # the engine's registry is the one list of profiles
    PROFILE_CHOICES = [(p, p) for p in PROFILES]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="sessions")
    jobs = models.ManyToManyField(Job, blank=True, related_name="sessions",
                                  help_text="jobs to schedule; empty at creation means every pending job")
    profile = models.CharField(max_length=16, choices=PROFILE_CHOICES, default="volcano")
    dry_run = models.BooleanField(default=False, help_text="compute placements without allocating")
    runs = models.PositiveIntegerField(default=0, help_text="times the session was started")  # its words since 0001
    attempts = models.PositiveIntegerField(default=0, help_text="commit attempts (retries after a lost race)")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True,
                                        help_text="last sign of life from the worker running it (progress writes)")
    engine_ms = models.FloatField(null=True, blank=True, help_text="time inside the engine")
    commit_ms = models.FloatField(null=True, blank=True, help_text="time writing results")
    pods_total = models.PositiveIntegerField(default=0)
    pods_placed = models.PositiveIntegerField(default=0)
    pods_admitted = models.PositiveIntegerField(default=0)
    jobs_total = models.PositiveIntegerField(default=0)
    job_count = models.PositiveIntegerField(default=0, help_text="jobs named at creation (a list shows it without "
                                                                 "counting the jobs table per row)")
    jobs_placed = models.PositiveIntegerField(default=0)
    nodes_total = models.PositiveIntegerField(default=0)
    weight = models.IntegerField(default=1, help_text="numa-aware plugin weight the session scored with")
    # db_default: rows written without the column (an older process during a rolling upgrade) are not checks
    room_check = models.BooleanField(default=False, db_default=False, help_text=(
        "the dry run that verified a make-room plan (not a session anyone asked for)"))
    explain_names = models.PositiveIntegerField(default=10, help_text="node names listed per verdict group")
    explain_groups = models.PositiveIntegerField(default=64, help_text="verdict groups kept per pod")
    counts = models.JSONField(default=dict, blank=True, help_text="the engine's counts (placed, admitted, ...)")
    timings = models.JSONField(default=dict, blank=True, help_text="the engine's timings")

    history = audited(excluded_fields=["summary"])  # the audit trail (numaweb.access.history)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"session {self.pk} ({self.profile}, {self.status})"


class Placement(models.Model):
    """One pod's outcome: node (None when unplaced), CPUs, predicted/admitted, and references to its
    verdict groups (`groups`), its predicted verdict and its admission's decisions."""

    session = models.ForeignKey(SchedulingSession, on_delete=models.CASCADE, related_name="placements",
                                db_index=False)  # (session, index) is unique, and indexed
    index = models.PositiveIntegerField(help_text="order in which the engine considered the pod")
    namespace = models.CharField(max_length=63, default="default")
    job = models.CharField(max_length=512)
    task = models.CharField(max_length=253, blank=True, default="")
    pod = models.CharField(max_length=512)
    uid = models.CharField(max_length=512, blank=True, default="")
    policy = models.CharField(max_length=32, blank=True, default="")
    qos = models.CharField(max_length=16, blank=True, default="")
    status = models.CharField(max_length=16, default=PodStatus.UNSCHEDULABLE, choices=PodStatus.choices)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="placements")
    node_name = models.CharField(max_length=253, blank=True, default="")
    cpus = models.CharField(max_length=4096, blank=True, default="", help_text="CPUs held (or predicted), list format")
    predicted = models.BooleanField(default=False, help_text="the scheduler placed it")
    admitted = models.BooleanField(null=True, blank=True, help_text="the kubelet would admit it there")
    score = models.IntegerField(null=True, blank=True)
    message = models.TextField(null=True, blank=True, help_text="why it is not placed, or the kubelet's message")
    kubelet_reason = models.CharField(max_length=64, null=True, blank=True)
    predicted_verdict = models.IntegerField(null=True, blank=True, help_text="Verdict.ref of the chosen node")
    predicted_numa = models.BigIntegerField(null=True, blank=True, help_text="NUMA mask of the prediction")
    predicted_cpus = models.CharField(max_length=1024, blank=True, default="", help_text="CPU mask, hex")
    predicted_order_dependent = models.BooleanField(default=False, help_text="Volcano could have predicted other "
                                                                             "CPUs (its Go map order)")
    admitted_numa = models.BigIntegerField(null=True, blank=True, help_text="NUMA mask of what the kubelet gave")
    allocations = models.JSONField(null=True, blank=True, help_text="the kubelet's allocations, per container")
    dra = models.JSONField(null=True, blank=True,
                           help_text="a pod with DRA claims: the devices its claims got, why, their NUMA nodes and "
                                     "the alignment (the engine's record)")
    admission = models.JSONField(null=True, blank=True,
                                 help_text="the chosen node's verdict: admitted, error, CPUs; decisions by ref")
    outcomes = models.JSONField(default=list, blank=True, help_text="empty: derived from the groups when read; "
                                "in rows written before 0008, node counts (passed, skipped, filtered, unschedulable)")
    groups = models.JSONField(default=list, blank=True, help_text="VerdictGroup refs of every group, in the engine's "
                              "order (ranked and cut when read); before 0008, the groups shown, in display order")
    groups_omitted = models.PositiveIntegerField(default=0)
    nodes_omitted = models.PositiveIntegerField(default=0)
    bound_cpus = models.CharField(max_length=1024, null=True, blank=True,
                                  help_text="Volcano's close-time binding (hex CPU mask); null: not bound")

    class Meta:
        ordering = ["session_id", "index"]
        constraints = [models.UniqueConstraint(fields=["session", "index"], name="placement_unique_index")]
        indexes = [models.Index(fields=["pod"], name="placement_pod")]  # the pod search's latest placement

    def __str__(self) -> str:
        return f"{self.pod} → {self.node_name or '(unplaced)'}"

    @property
    def reason(self) -> str:
        """What to show for it: the engine's message, else the kubelet's reason."""
        return self.message or self.kubelet_reason or ""

    @property
    def memory(self) -> dict[str, dict[str, int]]:  # allocations are stored compactly: absent means none
        """Memory held per NUMA node, summed over the containers."""
        out: dict[str, dict[str, int]] = {}
        for a in self.allocations or ():
            for numa, res in (a.get("memory") or {}).items():
                slot = out.setdefault(str(numa), {})
                for r, amount in res.items():
                    slot[r] = slot.get(r, 0) + amount
        return out

    @property
    def devices(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for a in self.allocations or ():
            for r, ids in (a.get("devices") or {}).items():
                out.setdefault(r, []).extend(ids)
        return out


class _SessionPart(models.Model):
    # no index of its own: the (session, ref) unique constraint's index serves lookups by session
    session = models.ForeignKey(SchedulingSession, on_delete=models.CASCADE, related_name="+", db_index=False)
    ref = models.PositiveIntegerField()

    class Meta:
        abstract = True


class SessionJob(models.Model):
    """A job's gang outcome in a session."""

    session = models.ForeignKey(SchedulingSession, on_delete=models.CASCADE, related_name="job_results",
                                db_index=False)
    index = models.PositiveIntegerField()
    job = models.CharField(max_length=253)
    namespace = models.CharField(max_length=253, default="default")
    priority = models.IntegerField(default=0)
    min_available = models.PositiveIntegerField(default=0)
    pods = models.PositiveIntegerField(default=0)
    placed = models.PositiveIntegerField(default=0)
    held = models.PositiveIntegerField(default=0, help_text="pods that already held resources (not run again)")
    committed = models.BooleanField(default=False)

    class Meta:
        ordering = ["session_id", "index"]
        constraints = [models.UniqueConstraint(fields=["session", "index"], name="sessionjob_unique_index")]


class Verdict(_SessionPart):
    """One distinct verdict (a pod shape on a node class): `ref` is the engine's verdict id."""

    outcome = models.CharField(max_length=16)
    code = models.CharField(max_length=64, null=True, blank=True)
    reason = models.TextField(null=True, blank=True)
    numa_count = models.PositiveIntegerField(default=0)
    numa_mask = models.BigIntegerField(default=0)
    cpus = models.CharField(max_length=1024, blank=True, default="", help_text="CPU mask, hex")
    evidence = models.PositiveIntegerField(null=True, blank=True, help_text="Detail ref: hints per container "
                                                                            "(volcano) or decisions (aligned)")
    own = models.JSONField(null=True, blank=True, help_text="what is particular to this verdict (CPUs per "
                                                            "container; the admission's node, pod, allocations)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "ref"], name="verdict_unique_ref")]


class NodeNames(_SessionPart):
    """A list of node names (space-separated), shared by every group that lists exactly these nodes."""

    names = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "ref"], name="nodenames_unique_ref")]


class VerdictGroup(_SessionPart):
    """Nodes that gave a pod the same verdict and score: count and the first names."""

    verdict = models.PositiveIntegerField()
    score = models.IntegerField(null=True, blank=True)
    node_count = models.PositiveIntegerField()
    names = models.PositiveIntegerField(help_text="NodeNames ref")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "ref"], name="verdictgroup_unique_ref")]


class Detail(_SessionPart):
    """A JSON detail stored once however many verdicts and pods share it."""

    data = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "ref"], name="detail_unique_ref")]
