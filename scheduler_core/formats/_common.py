"""Shared pieces of the importers: bounded input reading, hardened YAML, hex masks, checked access to
parsed JSON/YAML, the one place where per-CPU records become a `Topology` (core ids = smallest thread id
of the core), and an import's result (`Loaded`)."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import EngineError, FormatError
from ..model.cpuset import MAX_CPU_ID, CPUSet
from ..model.kubelet_config import KubeletConfig
from ..model.node import Allocation
from ..model.topology import CPU, Device, NUMANode, Topology
from . import _fast_yaml

if TYPE_CHECKING:
    import yaml

#: Largest input accepted, checked before any parsing (a real hwloc XML of a 400-thread machine
#: with PCI devices is well under 1 MiB).
MAX_INPUT_BYTES = 16 * 2**20
#: YAML documents whose node graph would expand beyond this many nodes are refused (alias bombs).
MAX_YAML_NODES = 200_000
#: Highest NUMA id the engine can hold (the kubelet's 64-bit NUMA masks).
MAX_NUMA_ID = 63

#: A mapping as the JSON and YAML readers build it: nothing about its values is known until checked. JSON's keys
#: are strings; YAML's nearly always are (a plain `0:` is an int), so code that needs a key's text converts it.
JSONObject = dict[str, object]


def as_object(value: object, where: str) -> JSONObject:
    """`value` as a mapping: absent or empty (None, "", [], 0) is {}, as `value or {}` reads it; anything else
    that is not a mapping is a FormatError naming `where`, not an AttributeError later."""
    if isinstance(value, dict):
        return value
    if not value:
        return {}
    raise FormatError(f"{where} must be an object, not {type(value).__name__}")


def as_list(value: object, where: str) -> list[object]:
    """`value` as a list: absent or empty is [] (as `value or []`), anything else not a list a FormatError."""
    if isinstance(value, list):
        return value
    if not value:
        return []
    raise FormatError(f"{where} must be a list, not {type(value).__name__}")


def get_object(obj: JSONObject, key: str, where: str) -> JSONObject:
    """`obj[key]` as a mapping ({} when absent or empty), the error naming `where.key`."""
    return as_object(obj.get(key), f"{where}.{key}")


def get_list(obj: JSONObject, key: str, where: str) -> list[object]:
    """`obj[key]` as a list ([] when absent or empty), the error naming `where.key`."""
    return as_list(obj.get(key), f"{where}.{key}")


@dataclass
class Source:
    """An input after reading: `text` (decoded), `raw` bytes (for archives), or a directory."""

    text: str | None = None
    raw: bytes | None = None
    directory: pathlib.Path | None = None
    name: str = "<input>"


def read_source(data: object, limit: int = MAX_INPUT_BYTES) -> Source:
    """Read `data` (str text, bytes, or a path to a file or directory) with the size cap applied
    before anything is parsed."""
    if isinstance(data, Source):
        return data
    path: pathlib.Path | None = None
    if isinstance(data, os.PathLike):
        path = pathlib.Path(data)
    elif isinstance(data, str) and data and "\n" not in data and len(data) < 4096 and not data.lstrip().startswith(
            ("<", "{", "[")):
        candidate = pathlib.Path(data)
        try:
            if candidate.exists():
                path = candidate
        except OSError:
            path = None
    if path is not None:
        if path.is_dir():
            return Source(directory=path, name=str(path))
        if not path.is_file():
            raise FormatError(f"{path}: no such file")
        size = path.stat().st_size
        if size > limit:
            raise FormatError(f"{path}: {size} bytes is larger than the {limit // 2**20} MiB limit")
        with path.open("rb") as fh:
            raw = fh.read(limit + 1)
        return _from_bytes(raw, str(path), limit)
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        if len(raw) > limit:
            raise FormatError(f"input of {len(raw)} bytes is larger than the {limit // 2**20} MiB limit")
        return _from_bytes(raw, "<bytes>", limit)
    if isinstance(data, str):
        if len(data) > limit:
            raise FormatError(f"input of {len(data)} characters is larger than the "
                              f"{limit // 2**20} MiB limit")
        return Source(text=data, name="<text>")
    raise FormatError(f"cannot read a topology from a {type(data).__name__}; give text, bytes or a path")


ARCHIVE_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


def _from_bytes(raw: bytes, name: str, limit: int = MAX_INPUT_BYTES) -> Source:
    if len(raw) > limit:
        raise FormatError(f"{name}: larger than the {limit // 2**20} MiB limit")
    if raw.startswith(ARCHIVE_MAGIC) or (len(raw) > 262 and raw[257:262] == b"ustar"):
        return Source(raw=raw, name=name)
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{name}: not text (byte {exc.start} is not UTF-8) and not a known archive") from None
    return Source(text=text, name=name)


def check_text(text: str, name: str = "input") -> None:
    """Refuse binary garbage that happens to decode: control characters other than whitespace."""
    sample = text[:65536]
    bad = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if bad > 8 or "\x00" in sample:
        raise FormatError(f"{name}: binary data, not a topology text")


# -- YAML ----------------------------------------------------------------------------------------

def load_documents(text: str, name: str, max_nodes: int = MAX_YAML_NODES) -> list[object]:
    """A JSON value (text starting with `{` or `[`) as one document, else every YAML document."""
    if text.lstrip().startswith(("{", "[")):
        try:
            value: object = json.loads(text)
            return [value]
        except json.JSONDecodeError as exc:
            raise FormatError(f"{name}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise FormatError(f"{name}: JSON nested too deeply") from None
    return load_yaml_documents(text, name, max_nodes)


def load_yaml_documents(text: str, name: str = "YAML", max_nodes: int = MAX_YAML_NODES) -> list[object]:
    """All documents of a YAML stream via the safe loader, each refused before it is constructed
    when its node graph would expand beyond `max_nodes` (aliases counted at full size: YAML bombs)."""
    import yaml

    try:
        fast = _fast_yaml.read(text)  # rapidyaml, typed as PyYAML types (it refuses anchors); None: PyYAML reads it
    except _fast_yaml.Refused:
        _check_syntax(text, name)  # raises where PyYAML's parser fails; returns when it accepts the text after all
        fast = None
    if fast is not None:
        return fast
    check = bool(_ANCHOR.search(text))  # no anchor, no alias: nothing can expand
    loader = _loader_class()(text)
    docs: list[object] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None and check and _yaml_size(node, {}, max_nodes) > max_nodes:
                mark = node.start_mark
                raise FormatError(f"{name}: the document at line {mark.line + 1} expands to more than "
                                  f"{max_nodes} nodes (aliases/anchors used as a YAML bomb?)")
            docs.append(_build(node, loader) if node is not None else None)
        return docs
    except FormatError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise FormatError(f"{name}: invalid YAML{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise FormatError(f"{name}: invalid YAML: {exc}") from None
    except RecursionError:
        raise FormatError(f"{name}: YAML nested too deeply") from None
    finally:
        loader.dispose()


def _check_syntax(text: str, name: str) -> None:
    """PyYAML's parser over the whole text, events only (nothing is composed, so memory stays flat): invalid YAML
    fails here in a fraction of what building it would cost, with the same message."""
    import yaml

    loader = _loader_class()(text)
    next_event: Callable[[], object] = loader.get_event  # typed here: types-PyYAML leaves it unannotated
    try:
        while loader.check_event():
            next_event()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise FormatError(f"{name}: invalid YAML{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise FormatError(f"{name}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@functools.cache
def _loader_class() -> Callable[[str], yaml.SafeLoader]:
    """libyaml's safe loader, resolving each distinct plain scalar once (a snapshot repeats the same
    names and numbers thousands of times; resolution depends on the value alone)."""
    import yaml
    from yaml.resolver import Resolver

    # libyaml's loader when PyYAML was built with it; both have the safe loader's methods
    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    # typed here: types-PyYAML leaves the resolver unannotated
    resolve: Callable[[Resolver, type[yaml.Node], str, tuple[bool, bool]], str] = Resolver.resolve

    class Loader(base):  # type: ignore[valid-type,misc]  # `base` is chosen at run time, a SafeLoader either way
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._tags: dict[str, str] = {}

        def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
            if kind is yaml.ScalarNode and implicit[0]:
                tag = self._tags.get(value)
                if tag is None:
                    tag = self._tags[value] = resolve(self, kind, value, implicit)
                return tag
            return resolve(self, kind, value, implicit)

    return Loader


def _build(node: yaml.Node, loader: yaml.SafeLoader) -> object:
    """Python objects from a composed YAML node: plain dicts, lists and strings built directly, every
    other scalar (and a mapping with merge keys) by the safe constructor — the safe loader's result,
    several times faster than its generic constructor."""
    import yaml

    cls = node.__class__
    if cls is yaml.ScalarNode:
        return node.value if node.tag == _STR_TAG else loader.construct_object(node, deep=True)
    if cls is yaml.SequenceNode:
        return [_build(child, loader) for child in node.value]
    if any(k.tag == _MERGE_TAG for k, _ in node.value):
        return loader.construct_object(node, deep=True)
    try:
        return {_build(k, loader): _build(v, loader) for k, v in node.value}
    except TypeError:
        raise FormatError(f"YAML line {node.start_mark.line + 1}: a mapping key must be a plain value") from None


#: where a YAML anchor (`&name`) could start; kubectl never writes one, a YAML bomb needs them
_ANCHOR = re.compile(r"(?:^|[\s,\[{:-])&[^\s]")


def _yaml_size(root: yaml.Node, sizes: dict[int, int], limit: int = MAX_YAML_NODES) -> int:
    """Expanded node count, memoised per node so shared (aliased) nodes cost once to compute."""
    import yaml

    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if done:
            total = 1
            for c in children:
                total += sizes.get(id(c), 1)
                if total > limit:
                    break
            sizes[key] = total
        else:
            sizes[key] = 1  # provisional: a recursive alias counts once instead of looping
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


# -- masks and numbers -----------------------------------------------------------------------------

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


# -- building the topology -------------------------------------------------------------------------

@dataclass
class CPURecord:
    """One CPU as an importer saw it: `core_key` is any hashable that is equal exactly for the
    threads of one core; `uncore` an L3 id or None (then the socket is used)."""

    id: int
    core_key: object
    socket: int
    numa: int | None
    uncore: int | None = None


@dataclass
class Draft:
    """What an importer gathered, before it becomes a Topology."""

    cpus: list[CPURecord] = field(default_factory=list)
    numa_memory: dict[int, int] = field(default_factory=dict)
    numa_hugepages: dict[int, dict[str, int]] = field(default_factory=dict)
    distances: dict[int, dict[int, int]] | None = None
    devices: list[Device] = field(default_factory=list)
    offline: int = 0
    inferred: set[str] = field(default_factory=set)
    description: str = ""
    notes: list[str] = field(default_factory=list)
    dropped_numa: list[int] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)


@dataclass
class Loaded:
    """An import's result: the topology plus what the format said beyond it."""

    format: str
    topology: Topology
    kubelet: KubeletConfig | None = None
    allocations: list[Allocation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped_numa: list[int] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def inferred(self) -> tuple[str, ...]:
        return self.topology.inferred


def build_topology(draft: Draft, what: str) -> Topology:
    """Turn a draft into a Topology: core ids become the smallest thread id of each core, NUMA ids
    above 63 (memory-only GPU nodes, for instance) are left out with a note, missing distance
    entries are filled by a documented rule (diagonal 10, else the largest known distance)."""
    if not draft.cpus:
        raise FormatError(f"{what}: no CPUs found")
    core_min = _core_ids(draft.cpus, what)
    numa_of = _cpu_numa(draft.cpus, what)
    ordered = _numa_ids(draft, numa_of, what)
    nodes = [NUMANode(n, draft.numa_memory.get(n, 0), dict(sorted(draft.numa_hugepages.get(n, {}).items())))
             for n in ordered]
    cpus = [CPU(r.id, core_min[r.core_key], r.socket, numa, r.socket if r.uncore is None else r.uncore)
            for r, numa in zip(draft.cpus, numa_of, strict=True)]
    online = CPUSet(r.id for r in draft.cpus).mask
    try:
        return Topology(cpus, nodes, _distance_rows(draft, ordered), _kept_devices(draft, set(ordered)),
                        offline_cpus=CPUSet(draft.offline & ~online), inferred=draft.inferred,
                        description=draft.description)
    except EngineError as exc:
        raise FormatError(f"{what}: {exc}") from None


def _core_ids(records: list[CPURecord], what: str) -> dict[object, int]:
    """Each core's engine id, the smallest thread id of its `core_key`; a CPU listed twice or out of
    range is refused."""
    seen: set[int] = set()
    core_min: dict[object, int] = {}
    for rec in records:
        if rec.id in seen:
            raise FormatError(f"{what}: CPU {rec.id} is listed twice")
        if rec.id > MAX_CPU_ID or rec.id < 0:
            raise FormatError(f"{what}: CPU id {rec.id} is out of range 0-{MAX_CPU_ID}")
        seen.add(rec.id)
        prev = core_min.get(rec.core_key)
        if prev is None or rec.id < prev:
            core_min[rec.core_key] = rec.id
    return core_min


def _cpu_numa(records: list[CPURecord], what: str) -> list[int]:
    """The NUMA node of each record, in order: every CPU must have one the kubelet's masks can hold."""
    numa_of: list[int] = []
    for rec in records:
        if rec.numa is None:
            raise FormatError(f"{what}: CPU {rec.id} has no NUMA node")
        numa_of.append(rec.numa)
    high = next((r.id for r, n in zip(records, numa_of, strict=True) if n > MAX_NUMA_ID), None)
    if high is not None:
        raise FormatError(f"{what}: CPU {high} is on NUMA node above {MAX_NUMA_ID}; the kubelet's "
                          "NUMA masks cannot hold it")
    return numa_of


def _numa_ids(draft: Draft, numa_of: list[int], what: str) -> list[int]:
    """The topology's NUMA ids, sorted: those of CPUs, memory, hugepages and distances; memory-only
    nodes above MAX_NUMA_ID are left out with a note."""
    numa_ids = set(draft.numa_memory) | set(draft.numa_hugepages) | set(numa_of)
    if draft.distances:
        numa_ids |= set(draft.distances)
    too_high = sorted(n for n in numa_ids if n > MAX_NUMA_ID)
    if too_high:
        draft.dropped_numa.extend(too_high)
        draft.notes.append(f"memory-only NUMA nodes {too_high} left out: ids above {MAX_NUMA_ID} do not fit "
                           "the kubelet's NUMA masks")
        numa_ids -= set(too_high)
    return sorted(numa_ids)


def _distance_rows(draft: Draft, ordered: list[int]) -> dict[int, list[int]] | None:
    """The distance matrix over `ordered`, a missing entry filled (10 on the diagonal, else the
    largest known distance) and `distances` flagged inferred then; None when the draft has none."""
    if not draft.distances:
        return None
    known = [v for row in draft.distances.values() for v in row.values()]
    far = max(known) if known else 20
    distances: dict[int, list[int]] = {}
    filled = False
    for a in ordered:
        row = []
        for b in ordered:
            v = draft.distances.get(a, {}).get(b)
            if v is None:
                filled = True
                v = 10 if a == b else far
            row.append(v)
        distances[a] = row
    if filled:
        draft.inferred.add("distances")
    return distances


def _kept_devices(draft: Draft, kept: set[int]) -> list[Device]:
    """The draft's devices, NUMA nodes left out of the topology dropped from their locality (noted)."""
    devices = []
    for d in draft.devices:
        if d.numa is not None and any(n not in kept for n in d.numa):
            numa = tuple(n for n in d.numa if n in kept)
            draft.notes.append(f"device {d.id}: NUMA nodes outside the topology dropped from its locality")
            d = Device(d.id, d.resource, numa, d.healthy, d.name)
        devices.append(d)
    return devices


def json_object(text: str, what: str) -> JSONObject:
    """Parse JSON that must be an object, with the line and column of a syntax error."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{what}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise FormatError(f"{what}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise FormatError(f"{what}: must be a JSON object")
    return data
