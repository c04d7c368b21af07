"""Hint tables for display: the engine's explain records (scheduler_core/explain.py schema) and its
admission results turned into rows of text. Nothing is decided here; hints are written with the
engine's `format_hint` and the summary line with its `unavailable_message`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler_core.kubelet.topologymanager.hint import TopologyHint, format_hint
from scheduler_core.scheduler.explain import Outcome, unavailable_message

if TYPE_CHECKING:  # the result inventory's checks.what_if hands over, named for the annotation only
    from scheduler_core.kubelet.admission import AdmitResult

FAILED = (Outcome.FILTERED, Outcome.UNSCHEDULABLE)
SHOWN_HINTS = 6  # hints listed inline per provider; the rest sit behind a <details>
PROVIDER_NAMES = {"provider 0": "devices", "provider 1": "cpu", "provider 2": "memory"}
SORTS = {
    "outcome": "engine order (passed first, best score first)",
    "score": "score, highest first",
    "name": "node name",
    "reason": "reason",
    "count": "nodes in the class, most first",
}


def hint_text(hint: Mapping | None, numa_count: int | None) -> str:
    if hint is None:
        return "—"
    return format_hint(TopologyHint.from_dict(hint), numa_count or None)


@dataclass
class Provider:
    """One provider's hints for one container (or the pod) on a row."""

    label: str
    hints: list[str]

    @property
    def shown(self) -> list[str]:
        return self.hints[:SHOWN_HINTS]

    @property
    def rest(self) -> list[str]:
        return self.hints[SHOWN_HINTS:]


@dataclass
class HintRow:
    nodes: list[str]
    node_count: int
    outcome: str
    code: str | None
    score: int | None
    reason: str
    explanation: str
    providers: list[Provider] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    admit: bool | None = None
    numa: list[int] = field(default_factory=list)
    cpus: str = ""
    chosen: bool = False

    @property
    def unlisted(self) -> int:
        return max(0, self.node_count - len(self.nodes))

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED


def _provider_label(resource: str, container: str | None) -> str:
    name = PROVIDER_NAMES.get(resource, resource)
    return f"{name} ({container})" if container else name


def build_row(group: Mapping, verdict: Mapping | None, numa_count: int | None, chosen: str = "") -> HintRow:
    """One hint-table row from an explain group and its verdict (either profile's evidence)."""
    verdict = verdict or {}
    row = HintRow(nodes=list(group.get("nodes") or []), node_count=int(group.get("node_count") or 0),
                  outcome=str(group.get("outcome") or verdict.get("outcome") or ""), code=verdict.get("code"),
                  score=group.get("score"), reason=str(group.get("reason") or verdict.get("reason") or ""),
                  explanation="", numa=list(verdict.get("numa") or []), cpus=str(verdict.get("cpus") or ""))
    row.chosen = bool(chosen) and chosen in row.nodes
    admits = []
    for c in verdict.get("containers") or ():  # volcano: the plugin's CPU hints per container
        hints = (c.get("hints") or {}).get("cpu")
        label = _provider_label("cpu", c.get("container"))
        row.providers.append(Provider(label, ["{any: T}"] if hints is None else
                                      [hint_text(h, numa_count) for h in hints]))
        row.merged.append(hint_text(c.get("best_hint"), numa_count))
        admits.append(bool(c.get("admit")))
    admission = verdict.get("admission")
    if admission:  # aligned: the kubelet's providers and merge per decision
        for d in admission.get("decisions") or ():
            merge = d.get("merge") or {}
            width = len(merge.get("numa_nodes") or ()) or numa_count
            for rh in merge.get("resource_hints") or ():
                row.providers.append(Provider(_provider_label(rh["resource"], d.get("container")),
                                              [hint_text(h, width) for h in rh.get("hints") or ()]))
            if merge:
                row.merged.append(merge.get("hint_text") or hint_text(merge.get("hint"), width))
                admits.append(bool(merge.get("admit")))
        error = admission.get("error")
        if error:
            where = ", ".join(f"{k} {error[k]}" for k in ("container", "resource") if error.get(k))
            row.reason = f"{error.get('reason')}: {error.get('message')}" + (f" ({where})" if where else "")
    if admits:
        row.admit = all(admits)
    row.explanation = _explain(row, numa_count)
    return row


def _explain(row: HintRow, numa_count: int | None) -> str:
    if row.failed:
        return row.reason
    if row.outcome == Outcome.SKIPPED:
        return row.reason or "the numa-aware plugin does not apply to this pod here"
    if not row.numa:
        return row.reason or "fits (no NUMA alignment asked)"
    where = "+".join(str(n) for n in row.numa)
    if len(row.numa) == 1:
        return f"fits on one NUMA node ({where})" + (f", CPUs {row.cpus}" if row.cpus else "")
    merged = f", best hint {row.merged[0]}" if row.merged else ""
    return f"needs {len(row.numa)} NUMA nodes ({where}){merged}" + (f", CPUs {row.cpus}" if row.cpus else "")


def expand_groups(groups: Sequence[Mapping]) -> list[Mapping]:
    """One row per node instead of per class: every listed name becomes a row sharing its class's
    verdict; nodes the record did not name (beyond explain_names) stay one summary row."""
    out: list[Mapping] = []
    for g in groups:
        names = list(g.get("nodes") or [])
        out.extend({**g, "nodes": [name], "node_count": 1} for name in names)
        rest = int(g.get("node_count") or 0) - len(names)
        if rest > 0:
            out.append({**g, "nodes": [], "node_count": rest})
    return out


def filter_groups(groups: Sequence[Mapping], show: str = "all", reason: str = "") -> list[Mapping]:
    out = list(groups)
    if show == "failed":
        out = [g for g in out if g.get("outcome") in FAILED]
    elif show == "passed":
        out = [g for g in out if g.get("outcome") not in FAILED]
    if reason:
        out = [g for g in out if (g.get("reason") or "") == reason]
    return out


def sort_groups(groups: list[Mapping], key: str) -> list[Mapping]:
    if key == "score":
        return sorted(groups, key=lambda g: (g.get("score") is None, -(g.get("score") or 0)))
    if key == "name":
        return sorted(groups, key=lambda g: (g.get("nodes") or [""])[0])
    if key == "reason":
        return sorted(groups, key=lambda g: (g.get("reason") or ""))
    if key == "count":
        return sorted(groups, key=lambda g: -int(g.get("node_count") or 0))
    return list(groups)  # the engine's order


def reasons_of(groups: Sequence[Mapping]) -> list[str]:
    return sorted({g["reason"] for g in groups if g.get("reason")})


def summary_line(groups: Sequence[Mapping], placed_on: str, message: str, refused: str = "") -> str:
    """Upstream-style line: the engine's message for an unplaced pod, else where it went and the
    `0/N nodes are unavailable: ...` line of the nodes that failed (engine's formatter). A pod the kubelet
    `refused` (its reason and message) is not "placed": the line says the scheduler chose the node and the
    kubelet refused it there."""
    failures: dict[str, int] = {}
    passed = 0
    for g in groups:
        if g.get("outcome") in FAILED:
            reason = str(g.get("reason") or g.get("outcome"))  # a failed group has an outcome
            failures[reason] = failures.get(reason, 0) + int(g.get("node_count") or 0)
        else:
            passed += int(g.get("node_count") or 0)
    if not placed_on:
        return message or unavailable_message(failures)
    fit = f"{passed} node{'s' if passed != 1 else ''} fit"
    head = (f"the scheduler chose {placed_on}, where the kubelet refused it ({refused}); {fit}" if refused
            else f"placed on {placed_on}; {fit}")
    return f"{head}; {unavailable_message(failures)}" if failures else head


def admission_view(result: AdmitResult) -> dict:
    """An `AdmitResult` (what-if) as display rows: per decision each provider's hints, the merged
    hint and admit; then the error and what would be allocated."""
    return admission_rows(result.to_dict())


def admission_rows(data: Mapping) -> dict:
    """`admission_view` from an admission's JSON form (`AdmitResult.to_dict()`, as a session's pod record keeps the
    chosen node's and a rejected pod keeps its replay)."""
    decisions = []
    for d in data["decisions"]:
        merge = d.get("merge") or {}
        width = len(merge.get("numa_nodes") or ()) or None
        decisions.append({
            "container": d.get("container") or "(pod scope)",
            "providers": [Provider(PROVIDER_NAMES.get(rh["resource"], rh["resource"]),
                                   [hint_text(h, width) for h in rh.get("hints") or ()])
                          for rh in merge.get("resource_hints") or ()],
            "merged": merge.get("hint_text") or hint_text(merge.get("hint"), width),
            "admit": merge.get("admit"),
            "policy": merge.get("policy"),
        })
    return {"admitted": data.get("admitted"), "error": data.get("error"), "cpus": data.get("cpus"),
            "allocations": data.get("allocations") or [], "decisions": decisions}
