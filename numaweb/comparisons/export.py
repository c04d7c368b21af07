"""What a comparison reports, in one place: the metrics in display order with their labels, and the
comparison as JSON (everything, per-node tables included) or as CSV rows (one row per variant)."""

from __future__ import annotations

from scheduler_core.scheduler.compare import BLOCK_BINS

from .models import Comparison

#: (key in the variant's metrics, label, True when a larger value is better); display and CSV order
#: the free single-NUMA block histogram's size bins (the engine's), as the page and the CSV label them
BLOCK_BIN_LABELS = tuple(label for label, _lo, _hi in BLOCK_BINS)
METRICS: tuple[tuple[str, str, bool | None], ...] = (
    ("pods_placed", "pods placed", True),
    ("pods_unplaced", "pods unplaced", False),
    ("jobs_committed", "gang jobs committed", True),
    ("jobs_rolled_back", "gang jobs rolled back", False),
    ("topology_affinity_errors", "TopologyAffinityErrors", False),
    ("pods_multi_numa", "pods spanning >1 NUMA node", False),
    ("mean_numa_distance", "mean NUMA distance", False),
    ("cpu_prediction_mismatches", "CPU prediction mismatches", False),
    ("free_single_numa_blocks", "free single-NUMA blocks", True),
    ("headroom", "headroom (pods of the shape)", True),
    ("engine_s", "engine time (s)", None),
)
SETTINGS = ("profile", "topology_manager_policy", "topology_manager_scope", "cpu_manager_options", "weight",
            "distance_tie_break")


def comparison_dict(comparison: Comparison, nodes: bool = True) -> dict:
    """The comparison as plain data; `nodes=False` leaves out the per-node tables (large clusters)."""
    variants = []
    for v in comparison.variants.all():
        item = {"index": v.index, "label": v.label, **{k: v.settings.get(k) for k in SETTINGS},
                "status": v.status, "error": v.error, "progress_done": v.progress_done,
                "progress_total": v.progress_total, "engine_ms": v.engine_ms, "metrics": v.metrics,
                "headroom": v.headroom, "changed_nodes": v.changed_nodes,
                "started_at": v.started_at, "finished_at": v.finished_at}
        if nodes:
            item["nodes"] = v.nodes
        variants.append(item)
    return {"id": comparison.pk, "cluster": comparison.cluster_id, "status": comparison.status,
            "jobs": sorted(j.pk for j in comparison.jobs.all()), "shape": comparison.shape,
            "created_at": comparison.created_at, "finished_at": comparison.finished_at,
            "cluster_changed": bool(comparison.changed_nodes), "changed_nodes": comparison.changed_nodes,
            "snapshot_nodes": len(comparison.snapshot), "variants": variants}


def csv_rows(comparison: Comparison) -> list[list[object]]:
    """Header, then one row per variant: its settings, status, every metric and the block histogram."""
    bins = BLOCK_BIN_LABELS
    header: list[object] = ["comparison", "variant", "label", *SETTINGS, "status", "error",
                            *(k for k, _l, _b in METRICS), *(f"blocks_{b}" for b in bins), "cluster_changed"]
    rows = [header]
    for v in comparison.variants.all():
        options = v.settings.get("cpu_manager_options")
        values = {**v.settings, "cpu_manager_options": "" if options is None else ",".join(options) or "(none)"}
        hist = v.metrics.get("block_histogram") or {}
        rows.append([comparison.pk, v.index, v.label, *("" if values.get(k) is None else values[k] for k in SETTINGS),
                     v.status, v.error, *("" if v.metrics.get(k) is None else v.metrics[k] for k, _l, _b in METRICS),
                     *(hist.get(b, "") for b in bins), bool(comparison.changed_nodes)])
    return rows
