"""Comparisons and headroom: rows → engine (`scheduler_core.scheduler.compare`) → rows.

`start_comparison` validates the variants against the cluster's own kubelet settings, records the
node generations it was asked on (the snapshot), and once committed sends one Celery task per
variant as a group, so the workers run them in parallel. Each variant is a dry run: it reads the
cluster, notes every node whose generation moved away from the snapshot, applies its overrides to
the engine's node objects (never to the rows), runs the session and the headroom, and writes its
metrics to its own row. A variant is a run (numaweb.worker.runs: claim, progress, limits, failure, re-queue);
`VariantRuns` adds what is its own. The variant that ends last, however it ends, closes the comparison, checking
the generations once more; nodes that changed meanwhile are listed on the comparison."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Sum
from django.utils import timezone

from numaweb.inventory import dra
from numaweb.inventory.models import Cluster, Node
from numaweb.inventory.services import KUBELET_FIELDS, cluster_nodes
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from numaweb.worker import runs
from scheduler_core.errors import EngineError
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.scheduler.cluster import Cluster as EngineCluster
from scheduler_core.scheduler.compare import Variant, run_variant
from scheduler_core.scheduler.headroom import Headroom, Shape, headroom

from .models import Comparison, ComparisonVariant

MAX_VARIANTS = 8


class ComparisonError(ValueError):
    """Bad input for a comparison; `field` names what is wrong (variants, shape, jobs)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# -- input ------------------------------------------------------------------------------------------
def parse_variants(cluster: Cluster, data: object) -> list[Variant]:
    """Engine variants from JSON, each checked against every distinct kubelet setting of the
    cluster's nodes, so an override a node cannot take is refused now, naming the variant and node."""
    if not isinstance(data, Sequence) or isinstance(data, str | bytes) or not data:
        raise ComparisonError("variants", "a list of 1 to 8 variants, each with a profile")
    if len(data) > MAX_VARIANTS:
        raise ComparisonError("variants", f"at most {MAX_VARIANTS} variants, not {len(data)}")
    variants = []
    for i, item in enumerate(data, 1):
        try:
            variants.append(Variant.from_dict(item))
        except EngineError as exc:
            raise ComparisonError("variants", f"variant {i}: {exc}") from None
    if any(v.overrides_kubelet for v in variants):
        configs = _kubelet_configs(cluster)
        for i, variant in enumerate(variants, 1):
            for config, node in configs.items():
                try:
                    variant.kubelet(config)
                except EngineError as exc:
                    raise ComparisonError("variants", f"variant {i}: node {node}: {exc}") from None
    return variants


def check_jobs(cluster: Cluster, jobs: Iterable[Job]) -> None:
    """Refuse jobs of another cluster (ComparisonError on `jobs`, naming each)."""
    try:
        job_services.check_cluster(jobs, cluster)
    except job_services.NotSchedulable as exc:
        raise ComparisonError("jobs", str(exc)) from None


def _kubelet_configs(cluster: Cluster) -> dict[KubeletConfig, str]:
    """Each distinct kubelet setting of the cluster's nodes, with the first node (by name) having it."""
    configs: dict[KubeletConfig, str] = {}
    for row in Node.objects.filter(cluster=cluster, removed_at__isnull=True).order_by("name").values(
            "name", *KUBELET_FIELDS):
        name = row.pop("name")
        configs.setdefault(KubeletConfig.from_dict({**row, "reserved_cpus": row["reserved_cpus"] or None}), name)
    return configs


def parse_shape(data: object) -> Shape | None:
    """A pod shape from `{"cpu", "memory", "devices", "policy"}` (None or {} for none)."""
    if data in (None, "", {}):
        return None
    if not isinstance(data, Mapping):
        raise ComparisonError("shape", "an object with cpu, memory, devices and policy")
    unknown = sorted(set(data) - {"cpu", "memory", "devices", "policy"})
    if unknown:
        raise ComparisonError("shape", f"{unknown[0]}: unknown field; expected cpu, memory, devices, policy")
    try:
        return Shape.parse(data.get("cpu"), data.get("memory"), data.get("devices"), data.get("policy"))
    except EngineError as exc:
        raise ComparisonError("shape", str(exc)) from None


def _snapshot(cluster_id: int) -> dict[str, int]:
    return dict(Node.objects.filter(cluster_id=cluster_id, removed_at__isnull=True).values_list("name", "generation"))


def _changed(snapshot: Mapping[str, int], now: Mapping[str, int]) -> list[str]:
    return sorted(n for n in set(snapshot) | set(now) if snapshot.get(n) != now.get(n))


# -- starting -----------------------------------------------------------------------------------------
def create_comparison(cluster: Cluster, variants: Sequence[Variant], jobs: Iterable[Job] | None = None,
                      shape: Shape | None = None) -> Comparison:
    """The comparison's rows, its snapshot taken now. Its jobs: `jobs` (checked to be the cluster's), else
    exactly those a session of the cluster would take (`jobs.services.schedulable_jobs`)."""
    jobs = list(jobs) if jobs is not None else job_services.schedulable_jobs(cluster)
    check_jobs(cluster, jobs)
    with transaction.atomic():
        comparison = Comparison.objects.create(cluster=cluster, shape=None if shape is None else shape.to_dict(),
                                               snapshot=_snapshot(cluster.pk))
        comparison.jobs.set(jobs)
        ComparisonVariant.objects.bulk_create([
            ComparisonVariant(comparison=comparison, index=i, profile=v.profile, settings=v.to_dict(), label=v.label)
            for i, v in enumerate(variants)])
    return comparison


class VariantRuns(runs.Kind):
    """Comparison variants as runs: what is theirs is `consume` (a dry run over the cluster with the variant's
    overrides, its metrics returned for the base to write) and `close` (the comparison, when its last variant
    ends, however it ends: done, failed, lost past NUMAWEB_RUN_MAX_RUNS, broker down)."""

    name = "comparison variants"
    model = ComparisonVariant
    task = "numaweb.run_comparison_variant"
    log_key = "variant"
    known_errors = (EngineError, ComparisonError)
    related = ("comparison__cluster",)
    steps_back = True  # NUMAWEB_VARIANT_SHARE: sessions and make-room questions first

    def consume(self, row: ComparisonVariant, run: runs.Run, progress: runs.Progress) -> dict[str, Any]:
        comparison = row.comparison
        nodes, seen = cluster_nodes(comparison.cluster)
        changed = _changed(comparison.snapshot, {name: gen for name, (_id, gen) in seen.items()})
        _rows, jobs = job_services.engine_jobs(comparison.jobs.all())
        shape = parse_shape(comparison.shape)
        started = time.perf_counter()
        claims = dra.state_of(comparison.cluster, {n.name: n.topology for n in nodes}, jobs)
        out = run_variant(nodes, jobs, Variant.from_dict(row.settings), shape, progress=progress,
                          headroom_pods=settings.NUMAWEB_HEADROOM_MAX_PODS,
                          headroom_seconds=settings.NUMAWEB_HEADROOM_SECONDS, dra=claims)
        engine_ms = (time.perf_counter() - started) * 1000
        pods = out["metrics"]["pods"]
        return {"status": Comparison.DONE, "engine_ms": engine_ms, "metrics": out["metrics"], "nodes": out["nodes"],
                "headroom": out["headroom"], "changed_nodes": changed, "progress_done": pods, "progress_total": pods}

    def close(self, row: ComparisonVariant) -> None:
        """Inside the transaction that wrote the variant's end, holding the comparison's row: finishers take turns,
        so the last one always sees every other variant ended, and readers never see all ended but not closed."""
        close_if_finished(Comparison.objects.select_for_update().get(pk=row.comparison_id))


VARIANTS = runs.register(VariantRuns())


def start_comparison(cluster: Cluster, variants: Sequence[Variant], jobs: Iterable[Job] | None = None,
                     shape: Shape | None = None) -> Comparison:
    """Create the comparison and, once committed, send its variants to the workers as one group. A
    broker that cannot be reached fails the variants, which closes the comparison, and raises BrokerUnavailable
    (with `session_id` = the comparison's id)."""
    comparison = create_comparison(cluster, variants, jobs, shape)
    ids = list(comparison.variants.order_by("index").values_list("pk", flat=True))
    runs.queue(lambda: enqueue(ids), lambda exc: VARIANTS.broker_failed(ids, exc), comparison.pk)
    return comparison


def enqueue(variant_ids: Sequence[int]) -> None:
    """One task per variant, sent as a Celery group (no result backend needed: results are rows)."""
    VARIANTS.send(variant_ids)


def execute_variant(variant_id: int) -> ComparisonVariant:
    """Run one variant now (in a worker): `VARIANTS.execute` (numaweb.worker.runs.Kind.execute). It writes only
    its own row, and closes the comparison when it is the last."""
    row: ComparisonVariant = VARIANTS.execute(variant_id)
    return row


def close_if_finished(comparison: Comparison) -> bool:
    """When no variant is left to run: the finish time, and every node that moved away from the
    snapshot (as a variant read it, or by now)."""
    if ComparisonVariant.objects.filter(comparison=comparison,
                                        status__in=(Comparison.PENDING, Comparison.RUNNING)).exists():
        return False
    changed = set(_changed(comparison.snapshot, _snapshot(comparison.cluster_id)))
    for names in ComparisonVariant.objects.filter(comparison=comparison).values_list("changed_nodes", flat=True):
        changed.update(names or ())
    Comparison.objects.filter(pk=comparison.pk).update(finished_at=timezone.now(), changed_nodes=sorted(changed))
    return True


# -- headroom --------------------------------------------------------------------------------------------
# Headroom is not a run (numaweb.worker.runs): it is answered inside the request that asks, within
# NUMAWEB_HEADROOM_MAX_PODS and NUMAWEB_HEADROOM_SECONDS, so there is no row to queue, claim or recover, and
# nothing for a worker to lose. Each web process keeps its last HEADROOM_KEPT answers by the cluster's state, so
# the same question on an unchanged cluster (a dashboard paged, filtered or reloaded) is not computed again.
HEADROOM_KEPT = 32
_answers: OrderedDict[tuple, Headroom] = OrderedDict()
_answers_lock = threading.Lock()


def cluster_state(cluster_id: int) -> tuple:
    """What moves whenever any node of the cluster changes: every allocation write advances its node's
    generation, every other edit its `updated_at`; a node added or removed changes the count."""
    state = Node.objects.filter(cluster_id=cluster_id).aggregate(
        nodes=Count("id"), generations=Sum("generation"), updated=Max("updated_at"))
    return state["nodes"], state["generations"], state["updated"]


def cluster_headroom(cluster: Cluster, shape: Shape, profile: str = "aligned",
                     gate: Callable[[], AbstractContextManager[object]] = nullcontext) -> Headroom:
    """How many more pods of `shape` a dry-run session of `profile` would place on the cluster now, within
    NUMAWEB_HEADROOM_MAX_PODS and NUMAWEB_HEADROOM_SECONDS (beyond: "at least"). The answer this process gave
    for the same cluster state is returned as it was; only a computation holds `gate` (gate.headroom_slot)."""
    key = (cluster.pk, cluster_state(cluster.pk), json.dumps(shape.to_dict(), sort_keys=True), profile,
           settings.NUMAWEB_HEADROOM_MAX_PODS, settings.NUMAWEB_HEADROOM_SECONDS)
    with _answers_lock:
        if key in _answers:
            _answers.move_to_end(key)
            return _answers[key]
    with gate():
        nodes, _seen = cluster_nodes(cluster)
        answer = headroom(EngineCluster(nodes), shape, profile, max_pods=settings.NUMAWEB_HEADROOM_MAX_PODS,
                          seconds=settings.NUMAWEB_HEADROOM_SECONDS)
    with _answers_lock:
        _answers[key] = answer
        while len(_answers) > HEADROOM_KEPT:
            _answers.popitem(last=False)
    return answer
