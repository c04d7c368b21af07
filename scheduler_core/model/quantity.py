"""Kubernetes resource quantities (`2`, `500m`, `8Gi`, `1e3`) as exact integers.

CPU becomes millicores, everything else a plain count (bytes for memory and hugepages). Values the
kubelet would round are rejected when they are not whole in the target unit, so nothing is
silently changed.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from ..errors import RequestError

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,3})?)(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_LIMIT = Decimal(2**63)


def parse_quantity(value: object, what: str = "quantity", field: str | None = None) -> Decimal:
    """Exact value of a Kubernetes quantity; `what` names the value in the error message, `field`
    is the error's `field` (the resource name, for forms)."""
    if isinstance(value, bool):
        raise RequestError(f"{what}: {value!r} is not a quantity", field)
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise RequestError(f"{what}: {value!r} is not a quantity", field)
        number = Decimal(repr(value))
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if not match:
            raise RequestError(f"{what}: {value!r} is not a quantity (expected e.g. 2, 500m, 8Gi)", field)
        try:
            number = Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]
        except InvalidOperation as exc:
            raise RequestError(f"{what}: {value!r} is not a quantity", field) from exc
    else:
        raise RequestError(f"{what}: {value!r} is not a quantity", field)
    if number < 0:
        raise RequestError(f"{what}: {value!r} is negative", field)
    if number >= _LIMIT:
        raise RequestError(f"{what}: {value!r} is too large", field)
    return number


def cpu_milli(value: object, what: str = "cpu", field: str | None = "cpu") -> int:
    """CPU quantity in millicores (`2` → 2000, `500m` → 500); finer than 1m is an error."""
    milli = parse_quantity(value, what, field) * 1000
    if milli != milli.to_integral_value():
        raise RequestError(f"{what}: {value!r} is finer than 1m", field)
    return int(milli)


def count(value: object, what: str = "quantity", field: str | None = None) -> int:
    """A whole-number quantity such as bytes of memory or a number of devices."""
    number = parse_quantity(value, what, field)
    if number != number.to_integral_value():
        raise RequestError(f"{what}: {value!r} is not a whole number", field)
    return int(number)


def format_bytes(n: int) -> str:
    """Compact binary form for display: 8Gi, 512Mi, 1536Ki, 100."""
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def human_bytes(n: int) -> str:
    """Rounded binary units for reading at a glance (16428452Ki → 15.7 GiB); pair it with
    `format_bytes` where the exact value matters."""
    for suffix, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {suffix}" if value >= 100 or value == int(value) else f"{value:.1f} {suffix}"
    return f"{n} B"
