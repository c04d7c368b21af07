"""`CPUSet`: an immutable set of CPU ids in Linux list format (`0-3,8-11`), an int bitmask inside.

Bit *i* of `mask` is CPU *i*; set algebra is integer arithmetic, which keeps the CPU Manager's hot
paths cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache

from ..errors import CPUSetError

#: Highest CPU id accepted; Linux's NR_CPUS tops out at 8192 on common kernels, so this is generous
#: while keeping hostile input such as `0-99999999` from allocating huge integers.
MAX_CPU_ID = 65535


@lru_cache(maxsize=1 << 16)
def list_format(mask: int) -> str:
    """A mask in Linux list format, run by run (a run's length is the trailing ones of the shifted mask).
    Remembered: a session writes the same few hundred CPU sets thousands of times."""
    parts: list[str] = []
    while mask:
        low = (mask & -mask).bit_length() - 1
        shifted = mask >> low
        run = (~shifted & (shifted + 1)).bit_length() - 1
        high = low + run - 1
        parts.append(str(low) if run == 1 else f"{low}-{high}")
        mask >>= high + 1
        mask <<= high + 1
    return ",".join(parts)


class CPUSet:
    """Immutable set of CPU ids. Iterates in ascending order; `str()` gives the Linux list format."""

    __slots__ = ("mask",)
    mask: int

    def __init__(self, cpus: Iterable[int] | int = ()) -> None:
        if isinstance(cpus, int):
            if cpus < 0:
                raise CPUSetError(f"a CPU mask cannot be negative: {cpus}")
            mask = cpus
        else:
            mask = 0
            for cpu in cpus:
                _check_id(cpu)
                mask |= 1 << cpu
        object.__setattr__(self, "mask", mask)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CPUSet is immutable")

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse Linux list format: `0-3,8,10-11`, with optional stride `0-62:2`; `""` is empty."""
        if not isinstance(text, str):
            raise CPUSetError(f"a cpuset must be a string, not {type(text).__name__}: {text!r}")
        mask = 0
        stripped = text.strip()
        if not stripped:
            return cls(0)
        for part in stripped.split(","):
            item = part.strip()
            if not item:
                raise CPUSetError(f"empty element in cpuset {text!r}")
            stride = 1
            if ":" in item:
                item, _, stride_text = item.partition(":")
                stride = _parse_int(stride_text, text)
                if stride < 1:
                    raise CPUSetError(f"stride must be at least 1 in cpuset {text!r}")
            if "-" in item:
                lo_text, _, hi_text = item.partition("-")
                lo, hi = _parse_int(lo_text, text), _parse_int(hi_text, text)
                if lo > hi:
                    raise CPUSetError(f"range {lo}-{hi} is reversed in cpuset {text!r}")
                _check_id(hi, text)
                if stride == 1:
                    mask |= ((1 << (hi - lo + 1)) - 1) << lo
                else:
                    for cpu in range(lo, hi + 1, stride):
                        mask |= 1 << cpu
            else:
                if stride != 1:
                    raise CPUSetError(f"stride without a range in cpuset {text!r}")
                cpu = _parse_int(item, text)
                _check_id(cpu, text)
                mask |= 1 << cpu
        return cls(mask)

    def __str__(self) -> str:
        return list_format(self.mask)

    def __repr__(self) -> str:
        return f"CPUSet({str(self)!r})"

    def __iter__(self) -> Iterator[int]:
        mask = self.mask
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def __len__(self) -> int:
        return self.mask.bit_count()

    def __bool__(self) -> bool:
        return self.mask != 0

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and cpu >= 0 and (self.mask >> cpu) & 1 == 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUSet) and other.mask == self.mask

    def __hash__(self) -> int:
        return hash(self.mask)

    def __or__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self.mask | other.mask)

    def __and__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self.mask & other.mask)

    def __sub__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self.mask & ~other.mask)

    def __le__(self, other: CPUSet) -> bool:
        return self.mask & ~other.mask == 0

    def sorted(self) -> list[int]:
        """CPU ids ascending."""
        return list(self)


def _parse_int(text: str, whole: str) -> int:
    t = text.strip()
    if not t.isdigit():
        raise CPUSetError(f"{t!r} is not a CPU id in cpuset {whole!r}")
    if len(t) > 6:
        raise CPUSetError(f"CPU id {t} is above the maximum {MAX_CPU_ID} in cpuset {whole!r}")
    return int(t)


def _check_id(cpu: object, whole: str | None = None) -> None:
    where = f" in cpuset {whole!r}" if whole is not None else ""
    if not isinstance(cpu, int) or isinstance(cpu, bool):
        raise CPUSetError(f"CPU id must be an integer, not {cpu!r}{where}")
    if cpu < 0:
        raise CPUSetError(f"CPU id cannot be negative: {cpu}{where}")
    if cpu > MAX_CPU_ID:
        raise CPUSetError(f"CPU id {cpu} is above the maximum {MAX_CPU_ID}{where}")
