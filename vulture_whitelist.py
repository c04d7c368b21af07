"""Engine names vulture reports as unused that are used in ways it cannot see (read by `./dev test`)."""

import scheduler_core

scheduler_core.__getattr__  # noqa: B018  Python calls a module's __getattr__ for the lazily imported public names

# TypedDict keys (the shapes of the engine's dict results and of the manifests it reads): they are read and
# written as d["key"], which vulture does not count as a use of the name
sc = scheduler_core
(  # noqa: B018
    sc.admission_errors, sc.admission_s, sc.build_s, sc.cpuDetail, sc.cpu_prediction_mismatches, sc.engine_s,
    sc.evaluate_s, sc.explanation_bytes, sc.failed_checks, sc.free_single_numa_blocks, sc.from_cpus, sc.from_numa,
    sc.initContainers, sc.jobs_committed, sc.jobs_rolled_back, sc.largest_block, sc.mean_numa_distance,
    sc.not_movable, sc.options_evaluated, sc.peak_rss_mib, sc.pod_meta, sc.pods_multi_numa, sc.pods_per_cpu_s,
    sc.pods_per_s, sc.pods_unplaced, sc.ratio_cpu, sc.ratio_wall, sc.replay_reason, sc.resReserved, sc.rolled_back,
    sc.session_s, sc.shortfall, sc.single_numa, sc.target_pods_now, sc.topologyPolicy, sc.topology_affinity_errors,
    sc.total_s, sc.us_per_pod_node, sc.pods_rejected, sc.admission_errors_by_reason, sc.pods_unplaced_policy_filter,
    sc.headroom_admitted, sc.headroom_rejected, sc.pods_with_claims, sc.pods_misaligned, sc.misaligned_kinds
)
