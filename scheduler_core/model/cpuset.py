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
            ids = list(cpus)
            for cpu in ids:
                _check_id(cpu)
            mask = _mask_of(ids)
        object.__setattr__(self, "mask", mask)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CPUSet is immutable")

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse Linux list format: `0-3,8,10-11`, with optional stride `0-62:2`; `""` is empty.

        Linear in the text: single ids go into a bitmap (`_mask_of`) and each range costs one shift of at
        most MAX_CPU_ID bits, so a state file's 100,000-element `defaultCpuSet` parses in about 0.04 s."""
        if not isinstance(text, str):
            raise CPUSetError(f"a cpuset must be a string, not {type(text).__name__}: {text!r}")
        stripped = text.strip()
        if not stripped:
            return cls(0)
        singles: list[int] = []
        ranges = 0
        for part in stripped.split(","):
            item = part.strip()
            if not item:
                raise CPUSetError(f"empty element in cpuset {_shown(text)}")
            stride = 1
            if ":" in item:
                item, _, stride_text = item.partition(":")
                stride = _parse_int(stride_text, text)
                if stride < 1:
                    raise CPUSetError(f"stride must be at least 1 in cpuset {_shown(text)}")
            if "-" in item:
                lo_text, _, hi_text = item.partition("-")
                lo, hi = _parse_int(lo_text, text), _parse_int(hi_text, text)
                if lo > hi:
                    raise CPUSetError(f"range {lo}-{hi} is reversed in cpuset {_shown(text)}")
                _check_id(hi, text)
                count = (hi - lo) // stride + 1
                # bits 0, stride, 2*stride, ...: the base-2**stride repunit (all ones when stride is 1)
                ranges |= ((1 << (stride * count)) - 1) // ((1 << stride) - 1) << lo
            else:
                if stride != 1:
                    raise CPUSetError(f"stride without a range in cpuset {_shown(text)}")
                cpu = _parse_int(item, text)
                _check_id(cpu, text)
                singles.append(cpu)
        return cls(_mask_of(singles) | ranges)

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


def _mask_of(ids: list[int]) -> int:
    """The mask of checked CPU ids. OR-ing `1 << id` into an int copies the whole int every time (quadratic
    in the ids of a large set), so past a few dozen ids a bitmap is filled and turned into the mask once."""
    if len(ids) <= 64:
        mask = 0
        for cpu in ids:
            mask |= 1 << cpu
        return mask
    data = bytearray((max(ids) >> 3) + 1)
    for cpu in ids:
        data[cpu >> 3] |= 1 << (cpu & 7)
    return int.from_bytes(data, "little")


def _shown(text: str) -> str:
    """The cpuset as an error message quotes it: its start only (a message costs the same whatever the input)."""
    return repr(text) if len(text) <= 80 else f"{text[:80]!r}... ({len(text)} characters)"


def _parse_int(text: str, whole: str) -> int:
    t = text.strip()
    if not t.isdigit():
        raise CPUSetError(f"{t[:20]!r} is not a CPU id in cpuset {_shown(whole)}")
    if len(t) > 6:
        raise CPUSetError(f"CPU id {t[:20]} is above the maximum {MAX_CPU_ID} in cpuset {_shown(whole)}")
    return int(t)


def _check_id(cpu: object, whole: str | None = None) -> None:
    """Raise CPUSetError unless `cpu` is an id from 0 to MAX_CPU_ID (the message, naming `whole`, is
    rendered only when raised: rendering it for every id made parsing quadratic)."""
    if not isinstance(cpu, int) or isinstance(cpu, bool):
        raise CPUSetError(f"CPU id must be an integer, not {cpu!r}{_where(whole)}")
    if cpu < 0:
        raise CPUSetError(f"CPU id cannot be negative: {cpu}{_where(whole)}")
    if cpu > MAX_CPU_ID:
        raise CPUSetError(f"CPU id {cpu} is above the maximum {MAX_CPU_ID}{_where(whole)}")


def _where(whole: str | None) -> str:
    return f" in cpuset {_shown(whole)}" if whole is not None else ""
