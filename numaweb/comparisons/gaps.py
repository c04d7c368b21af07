"""One line for every large gap between a comparison's variants that has a known cause, so a reader does not
take a profile's number for a better placement. Known causes, from the engine's own counts:

- kubelet refusals: a profile that does not predict the kubelet's admission (volcano aligns CPUs only, per
  container, without the CPU Manager's options; unaware checks counts only) places pods the kubelet refuses,
  by reason (placed and headroom alike);
- headroom cut short: a variant whose count stopped at a bound (time or pods tried) has "at least" a figure, not
  one to rank against a full count; the note names the setting that raises the bound;
- Volcano's task-policy = node-policy filter: a pod with a task topology policy goes only to static CPU Manager
  nodes whose Topology Manager policy is that same string, so its headroom (for a shape with a policy) or its
  pods admitted fall below another variant's.

A headroom gap is large when a variant's figure is at most LARGE of the best variant's; refusals, and pods the
filter turned away, are named whenever there are any."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .models import Comparison, ComparisonVariant

LARGE = 2 / 3
#: why a profile places pods the kubelet refuses
BLIND = {"volcano": "Volcano's plugin aligns CPUs only, container by container, and ignores the CPU Manager's "
                    "options, memory and devices",
         "unaware": "the unaware profile checks resource counts only",
         "nrt": "the NodeResourceTopology plugin checks only single-numa-node nodes, each zone's counts as the NRT "
                "publishes them (no CPU ids, no CPU Manager options), and passes every other node unchecked",
         "kai": "KAI-Scheduler's numa plugin checks single-numa-node and restricted nodes only, by each zone's counts "
                "as the NRT publishes them (no CPU ids, no CPU Manager options)",
         "koordinator": "Koordinator's NodeNUMAResource reads what koordlet publishes (no CPU Manager options) and "
                        "chooses CPUs only for the pods it binds (LSE, LSR)"}
#: the setting that raises each bound headroom can stop at (scheduler_core.scheduler.headroom's `stopped`)
BOUNDS = {"time budget": "NUMAWEB_HEADROOM_SECONDS", "pods tried": "NUMAWEB_HEADROOM_MAX_PODS"}
#: what a kubelet reason means, in a few words
REASONS = {"SMTAlignmentError": "full-pcpus-only refuses CPUs that are not whole cores",
           "TopologyAffinityError": "the Topology Manager found no NUMA alignment it allows"}


def _n(value: int) -> str:
    return f"{value:,}"


def _reasons(by_reason: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {reason}" + (f": {REASONS[reason]}" if reason in REASONS else "")
                     for reason, n in sorted(by_reason.items(), key=lambda item: -item[1]))


def notes(comparison: Comparison, variants: Sequence[ComparisonVariant]) -> list[dict[str, Any]]:
    """[{"variant": index, "metric": key, "text": one line}] for the finished variants."""
    done = [v for v in variants if v.status == Comparison.DONE and v.metrics]
    out: list[dict[str, Any]] = []

    def name(v: ComparisonVariant) -> str:
        return f"{v.index + 1}. {v.label}"

    def best(key: str) -> ComparisonVariant | None:
        scored = [v for v in done if isinstance(v.metrics.get(key), int)]
        return max(scored, key=lambda v: v.metrics[key]) if scored else None

    total_nodes = comparison.snapshot_size
    policy = (comparison.shape or {}).get("policy")
    for v in done:
        m = v.metrics
        why = BLIND.get(v.profile, "")
        rejected, by_reason = m.get("pods_rejected", 0), m.get("admission_errors_by_reason") or {}
        if rejected:
            out.append({"variant": v.index, "metric": "pods_rejected", "text": (
                f"{name(v)}: the kubelet refuses {_n(rejected)} of the {_n(m['pods_placed'])} pods it placed "
                f"({_reasons(by_reason)}){'; ' + why if why else ''}.")})
        room = v.headroom or {}
        if room.get("at_least"):
            stopped = room.get("stopped") or "bound"
            setting = next((name for words, name in BOUNDS.items() if words in stopped), "")
            out.append({"variant": v.index, "metric": "headroom_admitted", "text": (
                f"{name(v)}: headroom counting stopped at the {stopped}: at least {_n(m.get('headroom_admitted', 0))} "
                f"pods, not comparable with a full count{f' ({setting} raises the bound)' if setting else ''}.")})
        refused = m.get("headroom_rejected", 0)
        if refused:
            out.append({"variant": v.index, "metric": "headroom_rejected", "text": (
                f"{name(v)}: {_n(refused)} of its {_n(m['headroom'])} headroom pods would be refused by the kubelet; "
                f"it admits {_n(m['headroom_admitted'])}{'; ' + why if why else ''}.")})
        if v.profile != "volcano":
            continue
        nodes_by_policy = m.get("policy_nodes") or {}
        top = best("headroom_admitted")
        if (policy and policy != "none" and top is not None and top is not v
                and m.get("headroom_admitted", 0) <= LARGE * top.metrics["headroom_admitted"]):
            out.append({"variant": v.index, "metric": "headroom_admitted", "text": (
                f"{name(v)}: headroom {_n(m['headroom_admitted'])} against {_n(top.metrics['headroom_admitted'])} "
                f"for {name(top)}: Volcano's numa-aware plugin sends a pod whose task topology policy is {policy} "
                f"only to nodes with the static CPU Manager and that same Topology Manager policy, "
                f"{_n(nodes_by_policy.get(policy, 0))} of {_n(total_nodes)} nodes.")})
        top = best("pods_admitted")
        filtered = m.get("pods_unplaced_policy_filter", 0)
        if (filtered and top is not None and top is not v
                and m["pods_admitted"] < top.metrics["pods_admitted"]):
            mix = ", ".join(f"{p} {_n(n)}" for p, n in nodes_by_policy.items())
            out.append({"variant": v.index, "metric": "pods_admitted", "text": (
                f"{name(v)}: {_n(m['pods_admitted'])} pods admitted against {_n(top.metrics['pods_admitted'])} for "
                f"{name(top)}: {_n(filtered)} of its unplaced pods were turned away by Volcano's task-policy = "
                f"node-policy filter (nodes by policy: {mix or 'none with the static CPU Manager'}).")})
    return out
