"""`TopologyHint` (the kubelet's `topology_manager.go`) and the three-state answer of a hint provider
(ENGINE.md §2.2): None (no preference), [] (impossible) or a list of hints. Masks are ints (bit i = NUMA
node i); `None` is the kubelet's nil mask ("any NUMA node")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Union

from ...errors import RequestError
from ...model.bitmask import FULL, BitMaskError, bits_of, mask_of, mask_string

# --------------------------------------------------------------------------------------------------
# TopologyHint


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """A NUMA placement: `affinity` is a NUMA mask int (bit i = node i), None = nil ("any");
    `preferred` marks an ideally aligned placement."""

    affinity: int | None
    preferred: bool

    def __post_init__(self) -> None:
        a = self.affinity
        if a is not None and (type(a) is not int or a < 0 or a > FULL):
            raise BitMaskError(f"NUMA affinity must be a 64-bit mask int or None, not {a!r}")
        if type(self.preferred) is not bool:
            raise RequestError(f"a hint's preferred flag must be a bool, not {self.preferred!r}")

    def to_dict(self) -> dict[str, Any]:
        """`{"affinity": [sorted NUMA ids] | None, "preferred": bool}` (the vectors' form)."""
        return {"affinity": None if self.affinity is None else bits_of(self.affinity),
                "preferred": self.preferred}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopologyHint:
        """Inverse of `to_dict`; the affinity may also be given as a mask int."""
        return as_hint(data)

    def __str__(self) -> str:
        return format_hint(self)


def format_hint(hint: TopologyHint, numa_count: int | None = None) -> str:
    """The seeds' notation: `{01: T}`, `{11: F}`, `{any: T}`. NUMA 0 is the rightmost digit; the
    width is the machine's NUMA node count when known, else the kubelet's `String()` width."""
    if hint.affinity is None:
        digits = "any"
    elif numa_count:
        digits = format(hint.affinity, "b").zfill(numa_count)
    else:
        digits = mask_string(hint.affinity)
    return "{" + digits + (": T}" if hint.preferred else ": F}")


def _affinity(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        if value < 0 or value > FULL:
            raise BitMaskError(f"NUMA mask {value!r} is outside 64 bits")
        return value
    if isinstance(value, (str, bytes, bool)) or not isinstance(value, Iterable):
        raise RequestError(f"a hint's affinity must be a list of NUMA ids, a mask int or None, not {value!r}")
    try:
        return mask_of(value)
    except BitMaskError:
        raise BitMaskError(f"NUMA ids {list(value)!r}: bit number must be in range 0-63") from None


def as_hint(value: object) -> TopologyHint:
    """A `TopologyHint` from a hint, a `{"affinity", "preferred"}` mapping or an `(affinity,
    preferred)` pair; the affinity may be a list of NUMA ids, a mask int or None."""
    if type(value) is TopologyHint:
        return value
    if isinstance(value, Mapping):
        if "preferred" not in value or "affinity" not in value:
            raise RequestError(f"a hint needs 'affinity' and 'preferred', got {dict(value)!r}")
        affinity, preferred = value["affinity"], value["preferred"]
    elif isinstance(value, tuple) and len(value) == 2:
        affinity, preferred = value
    else:
        raise RequestError(f"not a topology hint: {value!r}")
    if type(preferred) is not bool:
        raise RequestError(f"a hint's preferred flag must be a bool, not {preferred!r}")
    return TopologyHint(_affinity(affinity), preferred)


# --------------------------------------------------------------------------------------------------
# Provider output (ENGINE.md §2.2, §2.3)

#: One provider's answer: None (nil map), {} (empty map) or {resource: None | [] | [hints...]}.
ProviderHints = Union[Mapping[str, Union[Sequence[TopologyHint], None]], None]  # noqa: UP007

_ANY_PREFERRED = (TopologyHint(None, True),)
_IMPOSSIBLE = (TopologyHint(None, False),)


def _hint_list(hints: object, where: str) -> list[TopologyHint]:
    if isinstance(hints, (str, bytes, Mapping)) or not isinstance(hints, Iterable):
        raise RequestError(f"hints of {where} must be a list, None or [], not {hints!r}")
    out = hints if isinstance(hints, list) else list(hints)
    if all(map(isinstance, out, repeat(TopologyHint))):
        return out
    return [as_hint(x) for x in out]


def flatten_providers_labeled(providers: Sequence[ProviderHints]) -> list[tuple[str, list[TopologyHint]]]:
    """`filterProvidersHints` keeping a label per list (the resource name, or `provider <i>` for a
    provider that returned a nil or empty map), so explanations can show every provider's hints."""
    if isinstance(providers, (str, bytes, Mapping)) or not isinstance(providers, Iterable):
        raise RequestError(f"providers' hints must be a list of provider results, not {providers!r}")
    out: list[tuple[str, list[TopologyHint]]] = []
    for i, provider in enumerate(providers):
        if provider is None or (isinstance(provider, Mapping) and not provider):
            out.append((f"provider {i}", list(_ANY_PREFERRED)))
            continue
        if not isinstance(provider, Mapping):
            raise RequestError(f"provider {i} must return a mapping resource -> hints or None, not {provider!r}")
        for resource, hints in provider.items():
            if hints is None:
                out.append((str(resource), list(_ANY_PREFERRED)))
            elif isinstance(hints, Sequence) and not isinstance(hints, (str, bytes)) and len(hints) == 0:
                out.append((str(resource), list(_IMPOSSIBLE)))
            else:
                lst = _hint_list(hints, f"resource {resource!r}")
                out.append((str(resource), lst if lst else list(_IMPOSSIBLE)))
    return out


def flatten_providers(providers: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    """`filterProvidersHints`: one hint list per resource, nil map → [(nil, P)], nil list →
    [(nil, P)], empty list → [(nil, NP)] (the resource cannot be placed)."""
    return [lst for _, lst in flatten_providers_labeled(providers)]
