"""PodDisruptionBudgets of a snapshot (`kubectl get pdb -A -o yaml`, policy/v1): which running pods each covers and
how many of them may be disrupted now, so that make room moves no more of them than the eviction API would let go.

A budget covers the pods of its namespace its `spec.selector` matches (a LabelSelector: `matchLabels` and
`matchExpressions` In, NotIn, Exists, DoesNotExist, all of them; an empty selector `{}` matches every pod of the
namespace, an absent one none). Disruptions allowed: `status.disruptionsAllowed` when the snapshot has it (the
disruption controller's figure); otherwise computed as that controller does, healthy pods (Running ones) minus the
desired healthy, never below zero — desired being `minAvailable`, or the expected pods less `maxUnavailable` (a
percentage of the expected pods, rounded up), or none when neither is set. A snapshot has no controller's scale, so
the expected pods are the matched pods."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import FormatError
from ._documents import JSONObject, get_list, get_object


@dataclass(frozen=True)
class DisruptionBudget:
    """A budget: `namespace/name`, the disruptions it allows now, and the running pods (`namespace/name`) it covers."""

    name: str
    allowed: int
    pods: frozenset[str]


@dataclass(frozen=True)
class LabelledPod:
    """What a budget looks at: a pod's namespace, name, labels and whether it runs."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    running: bool


def _matches(selector: JSONObject, labels: Mapping[str, str], where: str) -> bool:
    for key, value in get_object(selector, "matchLabels", where).items():
        if labels.get(str(key)) != str(value):
            return False
    for expr in get_list(selector, "matchExpressions", where):
        if not isinstance(expr, dict):
            raise FormatError(f"{where}.matchExpressions: each must be an object")
        key, op, values = str(expr.get("key", "")), expr.get("operator"), [str(v) for v in expr.get("values") or ()]
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            raise FormatError(f"{where}.matchExpressions: unknown operator {op!r}")
        if not ok:
            return False
    return True


def _scaled(value: object, total: int, where: str) -> int:
    """An int-or-percent field: an integer as it is, `N%` of `total` rounded up."""
    if isinstance(value, bool):
        raise FormatError(f"{where}: an integer or a percentage, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return math.ceil(int(value[:-1]) * total / 100)
    raise FormatError(f"{where}: an integer or a percentage, not {value!r}")


def budget(obj: JSONObject, pods: Iterable[LabelledPod], where: str) -> DisruptionBudget:
    """One PodDisruptionBudget object over the snapshot's pods (module docstring)."""
    meta = get_object(obj, "metadata", where)
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    if not name:
        raise FormatError(f"{where}: metadata.name is required")
    spec, status = get_object(obj, "spec", where), get_object(obj, "status", where)
    selector = spec.get("selector")
    if selector is not None and not isinstance(selector, dict):
        raise FormatError(f"{where}: spec.selector must be an object")
    matched = [p for p in pods if p.namespace == namespace and selector is not None
               and _matches(selector, p.labels, f"{where}: spec.selector")]
    running = [p for p in matched if p.running]
    allowed = status.get("disruptionsAllowed")
    if allowed is None:
        expected = len(matched)
        if spec.get("maxUnavailable") is not None:
            desired = expected - _scaled(spec["maxUnavailable"], expected, f"{where}: spec.maxUnavailable")
        elif spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected, f"{where}: spec.minAvailable")
        else:  # neither (policy/v1 defaults none): nothing is desired
            desired = 0
        allowed = len(running) - desired
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        raise FormatError(f"{where}: status.disruptionsAllowed must be an integer, not {allowed!r}")
    return DisruptionBudget(f"{namespace}/{name}", max(0, allowed), frozenset(f"{p.namespace}/{p.name}"
                                                                               for p in running))
