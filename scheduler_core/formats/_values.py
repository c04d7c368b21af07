"""Values importers read out of text, each checked as it is read: hex masks, integers, ids, CPU lists and
hugepage resource names; errors name where the value came from."""

from __future__ import annotations

from ..errors import EngineError, FormatError
from ..model.cpuset import MAX_CPU_ID, CPUSet


def parse_hex_mask(text: str, what: str) -> int:
    """hwloc / sysfs cpumap bitmap: comma-separated 32-bit hex words, most significant first;
    an empty word is zero. `0xf...f,` prefixes (hwloc's infinite sets) are refused."""
    s = text.strip().strip("\x00").strip()
    if not s:
        return 0
    words = s.split(",")
    if len(words) > (MAX_CPU_ID + 1) // 32 + 1:
        raise FormatError(f"{what}: mask {s[:40]!r}... has more than {(MAX_CPU_ID + 1) // 32} words")
    mask = 0
    for w in words:
        w = w.strip()
        if w.lower().startswith("0x"):
            w = w[2:]
        if len(w) > 8 and w.lstrip("0") and len(w.lstrip("0")) > 8:
            raise FormatError(f"{what}: mask word {w!r} of {s[:40]!r} is wider than 32 bits")
        try:
            value = int(w, 16) if w else 0
        except ValueError:
            raise FormatError(f"{what}: {s[:60]!r} is not a hex mask") from None
        mask = (mask << 32) | value
    if mask.bit_length() > MAX_CPU_ID + 1:
        raise FormatError(f"{what}: mask {s[:40]!r} sets bit {mask.bit_length() - 1}, above {MAX_CPU_ID}")
    return mask


def parse_int(text: object, what: str, minimum: int | None = 0) -> int:
    s = str(text).strip()
    try:
        value = int(s, 10)
    except ValueError:
        raise FormatError(f"{what}: {s[:40]!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise FormatError(f"{what}: {value} is below {minimum}")
    if value > 2**62:
        raise FormatError(f"{what}: {value} is too large")
    return value


#: The largest id of each kind an importer accepts, checked as the id is read, before any mask or table
#: sized by it is built (`1 << id` of a CPU id of 4e9 is a 500 MB integer). CPU ids: CPUSet's range;
#: NUMA node ids: the kernel's (at most 1024 nodes; ids above 63 are left out later, with a note); core
#: and package ids only name things, so their bound just refuses absurd input.
MAX_ID = {"CPU": MAX_CPU_ID, "NUMA node": 1023, "core": (1 << 20) - 1, "socket": (1 << 20) - 1}


def check_id(value: int, kind: str, what: str) -> int:
    """`value` if it is a valid `kind` id (see MAX_ID), else FormatError naming where it was read."""
    limit = MAX_ID[kind]
    if not 0 <= value <= limit:
        raise FormatError(f"{what}: {kind} id {value} is out of range 0-{limit}")
    return value


def parse_id(text: object, kind: str, what: str) -> int:
    """An id read from text, range-checked at once (`check_id`)."""
    return check_id(parse_int(text, what), kind, what)


def parse_cpulist(text: str, what: str) -> CPUSet:
    """Linux list format, errors re-raised as FormatError naming where the list came from."""
    try:
        return CPUSet.parse(text.strip().strip("\x00").strip())
    except EngineError as exc:
        raise FormatError(f"{what}: {exc}") from None


def hugepage_key(size_bytes: int) -> str:
    for suffix, unit in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size_bytes >= unit and size_bytes % unit == 0:
            return f"hugepages-{size_bytes // unit}{suffix}"
    return f"hugepages-{size_bytes}"
