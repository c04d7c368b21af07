"""The pods of a session an operator asks for first, by outcome: `unplaced` (no node, or rolled back), `rejected`
(placed by the scheduler, refused by the kubelet; `reason` narrows to one kubelet reason), `multi_numa` (admitted
with CPUs, memory or devices on more than one NUMA node), `mismatch` (admitted on other CPUs than the scheduler
predicted: the page's "≠ CPUs" badge); and by node, job and task, in a chosen order. The session page and
`GET /api/sessions/<id>/results/` filter the same way (`PodQuery`), and `counts` gives the numbers the page links."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from scheduler_core.model.cpuset import CPUSet

from .models import Placement, PodStatus, SchedulingSession

OUTCOMES = {"unplaced": "unplaced", "rejected": "rejected by the kubelet", "multi_numa": "spanning >1 NUMA node",
            "mismatch": "predicted ≠ admitted CPUs"}
#: sort keys (a leading "-" reverses); the scheduling order breaks ties
SORTS = {"index": ("index",), "node": ("node_name",), "job": ("namespace", "job"), "task": ("task",),
         "pod": ("pod",), "reason": ("kubelet_reason", "message"), "status": ("status",)}
#: one NUMA node's masks (stored as signed 64-bit, so bit 63 is negative): anything else admitted spans several
_SINGLE = [1 << i for i in range(63)] + [-(1 << 63)]


class BadQuery(ValueError):
    """A filter value that names nothing: `field` and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


@dataclass(frozen=True)
class PodQuery:
    outcome: str = ""
    reason: str = ""
    node: str = ""
    job: str = ""
    task: str = ""
    sort: str = "index"

    @classmethod
    def parse(cls, params: Any) -> PodQuery:
        """From query parameters (a QueryDict or mapping); an unknown outcome or sort raises BadQuery naming it."""
        values = {k: str(params.get(k) or "").strip() for k in ("outcome", "reason", "node", "job", "task", "sort")}
        if values["outcome"] and values["outcome"] not in OUTCOMES:
            raise BadQuery("outcome", f"{values['outcome']!r} is not one of {', '.join(OUTCOMES)}")
        if values["sort"] and values["sort"].removeprefix("-") not in SORTS:
            raise BadQuery("sort", f"{values['sort']!r} is not one of {', '.join(SORTS)} (a leading - reverses)")
        for field, value in values.items():
            if len(value) > 512:
                raise BadQuery(field, "longer than 512 characters")
        return cls(**{**values, "sort": values["sort"] or "index"})

    @property
    def active(self) -> bool:
        return any((self.outcome, self.reason, self.node, self.job, self.task))

    def items(self) -> list[tuple[str, str]]:
        """The parameters that differ from the defaults (for links that keep the filter)."""
        return [(k, v) for k, v in (("outcome", self.outcome), ("reason", self.reason), ("node", self.node),
                                    ("job", self.job), ("task", self.task), ("sort", self.sort))
                if v and not (k == "sort" and v == "index")]

    def apply(self, session: SchedulingSession, qs: QuerySet[Placement],
              mismatch: list[int] | None = None) -> QuerySet[Placement]:
        """`qs` filtered and ordered; `mismatch`: `mismatched(session)` when the caller has it already."""
        if self.outcome == "unplaced":
            qs = qs.filter(predicted=False)
        elif self.outcome == "rejected":
            qs = qs.filter(status=PodStatus.REJECTED)
        elif self.outcome == "multi_numa":
            qs = qs.filter(admitted=True, admitted_numa__isnull=False).exclude(admitted_numa=0).exclude(
                admitted_numa__in=_SINGLE)
        elif self.outcome == "mismatch":
            qs = qs.filter(index__in=mismatched(session) if mismatch is None else mismatch)
        if self.reason:  # the kubelet's reason, or words of the scheduler's message (an unplaced pod's)
            qs = qs.filter(Q(kubelet_reason=self.reason) | Q(message__icontains=self.reason))
        if self.node:
            qs = qs.filter(node_name=self.node)
        if self.job:  # "name" or "namespace/name"
            namespace, _, name = self.job.rpartition("/")
            qs = qs.filter(job=name, **({"namespace": namespace} if namespace else {}))
        if self.task:
            qs = qs.filter(task=self.task)
        fields = SORTS[self.sort.removeprefix("-")]
        sign = "-" if self.sort.startswith("-") else ""
        return qs.order_by(*(sign + f for f in fields), *(() if fields == ("index",) else ("index",)))


def mismatched(session: SchedulingSession) -> list[int]:
    """Indexes of the admitted pods whose CPUs differ from the scheduler's prediction (volcano's; as the session
    page's "≠ CPUs" badge)."""
    rows = session.placements.filter(admitted=True).exclude(predicted_cpus="").values_list(
        "index", "predicted_cpus", "cpus")
    out, parsed = [], {}  # a session's pods hold a few hundred distinct CPU sets: each text parsed once
    for i, predicted, cpus in rows:
        mask = int(predicted, 16)  # 0: the profile predicted no CPUs (aligned, unaware)
        if mask and cpus not in parsed:
            parsed[cpus] = CPUSet.parse(cpus or "").mask
        if mask and mask != parsed[cpus]:
            out.append(i)
    return out


def counts(session: SchedulingSession, mismatch: list[int] | None = None) -> dict[str, Any]:
    """{"unplaced", "rejected", "multi_numa", "mismatch": n, "reasons": {kubelet reason: n}} for the page's links:
    three queries, whatever the session's size (two with `mismatch`, as in `PodQuery.apply`)."""
    placements = session.placements.all()
    reasons = dict(placements.filter(status=PodStatus.REJECTED).values_list("kubelet_reason").annotate(
        n=Count("id")).order_by("kubelet_reason"))
    multi = Q(admitted=True, admitted_numa__isnull=False) & ~Q(admitted_numa=0) & ~Q(admitted_numa__in=_SINGLE)
    totals = placements.aggregate(unplaced=Count("id", filter=Q(predicted=False)), multi_numa=Count("id", filter=multi))
    return {"unplaced": totals["unplaced"], "rejected": sum(reasons.values()), "multi_numa": totals["multi_numa"],
            "mismatch": len(mismatched(session) if mismatch is None else mismatch),
            "reasons": {str(r or "unknown"): n for r, n in reasons.items()}}
