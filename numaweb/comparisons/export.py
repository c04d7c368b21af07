"""What a comparison reports, in one place: the metrics in display order with their labels (the kubelet's verdicts
among them: admitted, refused, refused by reason, headroom net of refusals), the one-line reasons for large gaps
between variants (`gaps`), and the comparison as JSON (everything, per-node tables included) or as CSV rows (one
row per variant)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler_core.dra.model import DEVICE_KINDS
from scheduler_core.scheduler.compare import BLOCK_BINS, Variant

from . import gaps
from .models import Comparison, ComparisonVariant

#: the kubelet's admission errors every comparison lists, refused or not (another reason a variant meets gets its
#: own row after these); TopologyAffinityError keeps its historical key
KUBELET_REASONS = ("TopologyAffinityError", "SMTAlignmentError", "UnexpectedAdmissionError")
Metric = tuple[str, str, bool | None]
#: the free single-NUMA block histogram's size bins (the engine's), as the page and the CSV label them
BLOCK_BIN_LABELS = tuple(label for label, _lo, _hi in BLOCK_BINS)

#: (key in the variant's metrics, label, True when a larger value is better); display and CSV order. "pods placed"
#: counts pods the kubelet then refuses, so it ranks nothing: admitted does
METRICS: tuple[Metric, ...] = (
    ("pods_admitted", "pods admitted by the kubelet", True),
    ("pods_placed", "pods placed by the scheduler (the kubelet may refuse them)", None),
    ("pods_unplaced", "pods unplaced", False),
    ("pods_rejected", "pods the kubelet refused (admission errors)", False),
    ("jobs_committed", "gang jobs committed", True),
    ("jobs_rolled_back", "gang jobs rolled back", False),
    ("pods_multi_numa", "pods spanning >1 NUMA node", False),
    ("mean_numa_distance", "mean NUMA distance", False),
    ("cpu_prediction_mismatches", "CPU prediction mismatches", False),
    ("free_single_numa_blocks", "free single-NUMA blocks", True),
    ("headroom_admitted", "headroom (pods of the shape) the kubelet admits", True),
    ("headroom_rejected", "headroom (pods of the shape) placed but refused by the kubelet", False),
    ("engine_s", "engine time (s)", None),
)
#: with DRA objects in the cluster: the pods whose claims got devices, and those whose devices sit off the NUMA
#: nodes of their pinned CPUs or memory (each kind, e.g. gpu-cpu, a row of its own: `metric_rows`)
DRA_METRICS: tuple[Metric, ...] = (
    ("pods_with_claims", "pods whose DRA claims got devices", None),
    ("pods_misaligned", "pods with DRA devices off their CPUs' or memory's NUMA nodes", False),
)
#: exported, not drawn: headroom as the scheduler counts it (refused pods included)
EXPORT_ONLY = ("headroom",)
#: a variant's settings as the exports list them: every field of the engine's variant; a variant stored before
#: the profiles' own settings (numa_strategy, cpu_bind_policy, ignore_list) existed has None for them (upstream's
#: defaults)
SETTINGS = Variant.FIELDS


def reason_key(reason: str) -> str:
    return "topology_affinity_errors" if reason == "TopologyAffinityError" else f"rejected_{reason}"


def metric_rows(variants: Iterable[ComparisonVariant]) -> list[Metric]:
    """METRICS with one row per kubelet reason (KUBELET_REASONS, then any other a variant met) after the refused
    total and, when the cluster has DRA objects (a variant counted pods with claims), the DRA rows after the pods
    spanning NUMA nodes: pods with claims, misaligned pods, and one row per misalignment kind a variant met."""
    variants = list(variants)
    seen = {r for v in variants for r in (v.metrics.get("admission_errors_by_reason") or {})}
    reasons = [*KUBELET_REASONS, *sorted(seen - set(KUBELET_REASONS))]
    at = [k for k, _l, _b in METRICS].index("pods_rejected") + 1
    rows = [*METRICS[:at], *((reason_key(r), f"kubelet refused: {r}", False) for r in reasons), *METRICS[at:]]
    if any("pods_misaligned" in v.metrics for v in variants):
        kinds = sorted({k for v in variants for k in (v.metrics.get("misaligned_kinds") or {})})
        at = [k for k, _l, _b in rows].index("pods_multi_numa") + 1
        rows[at:at] = [*DRA_METRICS, *((kind_key(k), f"misaligned: {k}", False) for k in kinds)]
    return rows


def kind_key(kind: str) -> str:
    return f"misaligned_{kind}"


def values(variant: ComparisonVariant) -> dict[str, Any]:
    """The variant's metrics with the kubelet rows filled in; a variant stored before they were recorded gets
    what its counts allow (refused in all, TopologyAffinityErrors, headroom's refused) and None for the rest."""
    m: dict[str, Any] = dict(variant.metrics)
    if not m:
        return m
    by_reason = m.get("admission_errors_by_reason")
    if by_reason is None:
        m.setdefault("pods_rejected", m.get("topology_affinity_errors", 0) + m.get("admission_errors", 0))
    else:
        for reason in KUBELET_REASONS:
            m.setdefault(reason_key(reason), 0)
        for reason, n in by_reason.items():
            m[reason_key(reason)] = n
    if "pods_misaligned" in m:  # a kind another variant met and this one did not is a 0
        for device in DEVICE_KINDS:
            for other in (*DEVICE_KINDS, "memory"):
                m.setdefault(kind_key(f"{device}-{other}"), 0)
        for kind, n in (m.get("misaligned_kinds") or {}).items():
            m[kind_key(kind)] = n
    room = variant.headroom or {}
    if "headroom_admitted" not in m and room.get("total") is not None:
        m["headroom_admitted"] = room["total"] - room.get("rejected", 0)
        m["headroom_rejected"] = room.get("rejected", 0)
    return m


def comparison_dict(comparison: Comparison, nodes: bool = True, jobs: bool = True) -> dict:
    """The comparison as plain data; `nodes=False` leaves out the per-node tables (large clusters), `jobs=False`
    counts the jobs instead of listing their ids (`jobs_count`: a list of comparisons)."""
    variants = []
    rows = list(comparison.variants.all())
    for v in rows:
        item = {"index": v.index, "label": v.label, **{k: v.settings.get(k) for k in SETTINGS},
                "status": v.status, "error": v.error, "progress_done": v.progress_done,
                "progress_total": v.progress_total, "engine_ms": v.engine_ms, "metrics": v.metrics,
                "headroom": v.headroom, "changed_nodes": v.changed_nodes,
                "started_at": v.started_at, "finished_at": v.finished_at}
        if nodes:
            item["nodes"] = v.nodes
        variants.append(item)
    return {"id": comparison.pk, "cluster": comparison.cluster_id, "status": comparison.status,
            **({"jobs": comparison.job_ids()} if jobs else {"jobs_count": comparison.jobs.count()}),
            "shape": comparison.shape,
            "created_at": comparison.created_at, "finished_at": comparison.finished_at,
            "cluster_changed": bool(comparison.changed_nodes), "changed_nodes": comparison.changed_nodes,
            "snapshot_nodes": comparison.snapshot_size, "variants": variants,
            "gaps": gaps.notes(comparison, rows)}


def csv_rows(comparison: Comparison) -> list[list[object]]:
    """Header, then one row per variant: its settings, status, every metric (a column per kubelet reason) and the
    block histogram."""
    bins = BLOCK_BIN_LABELS
    variants = list(comparison.variants.all())
    keys = [k for k, _l, _b in metric_rows(variants)] + list(EXPORT_ONLY)
    header: list[object] = ["comparison", "variant", "label", *SETTINGS, "status", "error", *keys,
                            *(f"blocks_{b}" for b in bins), "cluster_changed"]
    rows = [header]
    for v in variants:
        options, ignored = v.settings.get("cpu_manager_options"), v.settings.get("ignore_list")
        settings = {**v.settings, "cpu_manager_options": "" if options is None else ",".join(options) or "(none)",
                    "ignore_list": ",".join(ignored or ())}
        metrics = values(v)
        hist = v.metrics.get("block_histogram") or {}
        rows.append([comparison.pk, v.index, v.label,
                     *("" if settings.get(k) is None else settings[k] for k in SETTINGS), v.status, v.error,
                     *("" if metrics.get(k) is None else metrics[k] for k in keys),
                     *(hist.get(b, "") for b in bins), bool(comparison.changed_nodes)])
    return rows
