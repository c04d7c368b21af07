"""Importers and exporters: the files operators already have become engine objects in one call.

Entry points:

- ``load_topology(data, format=None) -> Topology``: `data` is text, bytes, or a path (a file, a
  sysfs folder, or a ``.tar.gz``/``.tar.bz2`` sysfs dump); the format is detected when None.
- ``load(data, format=None) -> Loaded``: the same, keeping what else the file said: ``.format``
  (detected), ``.topology``, ``.kubelet`` (NRT attributes, Numatopology policies), ``.inferred``
  (fields filled by a documented rule because the format cannot say them), ``.notes``,
  ``.allocations`` (kubelet state files), ``.extra``.
- ``load_allocations(*sources) -> list[Allocation]``: kubelet ``cpu_manager_state`` and
  ``memory_manager_state`` (origin ``imported``), merged per pod/container when several are given.
- ``load_jobs(data) -> list[Job]``: Volcano Job, Pod and Deployment YAML (multi-document).
- ``dump_topology(obj, format) -> str``: ``engine-json`` (Topology or Node), ``nrt`` and
  ``numatopo`` (a Node: capacity and its free state), ``synthetic`` (symmetric machines only).
- ``load_kubelet_config(data) -> KubeletFile``: a ``kind: KubeletConfiguration`` file as node settings
  (``.config``, a ``KubeletConfig``), its node-allocatable memory and the document;
  ``dump_kubelet_config(config, base=None) -> str`` writes one back (``kubelet_config``).
- ``detect_format(data) -> str``.

Supported input formats: hwloc-xml (v1, v2, v3), lscpu-text (summary, with or without the parse
sections), lscpu-parse (``-p`` and ``-e``), sysfs (folder), sysfs-tar (tar/tar.gz/tar.bz2/tar.xz),
numactl-hardware, synthetic (hwloc synthetic strings), nrt (NodeResourceTopology v1alpha1/2),
numatopo (Volcano Numatopology), cpu-manager-state, memory-manager-state, engine-json, workload,
kubelet-config (settings, not a topology).
Every problem raises ``FormatError`` (or another ``EngineError``) naming the line or element.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import FormatError
from ..model.kubelet_config import KubeletConfig
from ..model.node import Allocation
from ..model.topology import Topology
from ._draft import Loaded, build_topology
from ._source import MAX_INPUT_BYTES, Source, read_source
from .detect import FORMATS, detect_source, normalise

if TYPE_CHECKING:
    from ..model.jobs import Job
    from .kubelet_config import KubeletFile

__all__ = [
    "FORMATS", "MAX_INPUT_BYTES", "FormatError", "Loaded", "detect_format", "dump_kubelet_config", "dump_topology",
    "load", "load_allocations", "load_jobs", "load_kubelet_config", "load_topology",
]


def detect_format(data: object) -> str:
    """Name of the format of `data` (see `detect` for the rules); FormatError when unknown."""
    return detect_source(read_source(data))


def load(data: object, format: str | None = None) -> Loaded:
    """Import a topology with everything the format says about it."""
    src = read_source(data)
    fmt = normalise(format) if format else detect_source(src)
    if fmt in ("workload",):
        raise FormatError("a workload (Job/Pod/Deployment YAML) is not a topology; use load_jobs")
    if fmt == "kubelet-config":
        raise FormatError("a KubeletConfiguration holds a node's kubelet settings, not its topology; set the node's "
                          "settings from it instead")
    if fmt == "engine-json":
        from . import engine_json

        return engine_json.load(_text(src, fmt), fmt)
    if fmt in ("cpu-manager-state", "memory-manager-state"):
        from . import kubelet_state

        loaded: Loaded = kubelet_state.load_as_topology(_text(src, fmt), fmt)
        return loaded
    kubelet = None
    extra: dict[str, object] = {}
    allocations: list[Allocation] = []
    if fmt == "hwloc-xml":
        from . import hwloc_xml

        draft = hwloc_xml.load(_text(src, fmt))
    elif fmt in ("lscpu-text", "lscpu-parse"):
        from . import lscpu

        draft = lscpu.load(_text(src, fmt), fmt)
    elif fmt in ("sysfs", "sysfs-tar"):
        from . import sysfs

        draft = sysfs.load(src)
        fmt = "sysfs" if src.directory is not None else "sysfs-tar"
    elif fmt == "numactl-hardware":
        from . import numactl

        draft = numactl.load(_text(src, fmt))
    elif fmt == "synthetic":
        from . import synthetic

        draft = synthetic.load(_text(src, fmt))
    elif fmt == "nrt":
        from . import nrt

        draft, kubelet, extra = nrt.load(_text(src, fmt))
    elif fmt == "numatopo":
        from . import volcano_numatopo

        draft, kubelet, extra, allocations = volcano_numatopo.load(_text(src, fmt))
    else:  # pragma: no cover - normalise() already refused anything else
        raise FormatError(f"unknown format {fmt!r}")
    topology = build_topology(draft, fmt)
    return Loaded(fmt, topology, kubelet, allocations, list(draft.notes), list(draft.dropped_numa),
                  {**draft.extra, **extra})


def load_topology(data: object, format: str | None = None) -> Topology:
    """The contract entry point: a `Topology` from any supported input (format detected when None)."""
    return load(data, format).topology


def load_allocations(*sources: object, format: str | None = None) -> list[Allocation]:
    """Kubelet state files → allocations (origin `imported`); CPU and memory state of the same
    pod/container are merged into one allocation."""
    from . import kubelet_state

    merged: dict[tuple[str, str | None], Allocation] = {}
    for data in sources:
        src = read_source(data)
        fmt = normalise(format) if format else detect_source(src)
        if fmt not in ("cpu-manager-state", "memory-manager-state"):
            raise FormatError(f"{src.name}: {fmt} holds no allocations; expected cpu_manager_state or "
                              "memory_manager_state")
        for alloc in kubelet_state.allocations(_text(src, fmt), fmt):
            key = (alloc.pod, alloc.container)
            merged[key] = kubelet_state.merge(merged.get(key), alloc)
    return list(merged.values())


def load_jobs(data: object) -> list[Job]:
    """Volcano Job / Pod / Deployment YAML (or JSON), possibly multi-document → list of `Job`."""
    from . import workloads

    src = read_source(data)
    if src.text is None:
        raise FormatError(f"{src.name}: a workload must be YAML or JSON text")
    return workloads.load_jobs(src.text, src.name)


def load_kubelet_config(data: object) -> KubeletFile:
    """A KubeletConfiguration (text, bytes or a path) → `kubelet_config.KubeletFile`."""
    from . import kubelet_config

    src = read_source(data)
    fmt = detect_source(src)
    if fmt != "kubelet-config":
        raise FormatError(f"{src.name}: {fmt} is not a KubeletConfiguration")
    return kubelet_config.parse(_text(src, fmt), src.name)


def dump_kubelet_config(config: KubeletConfig, base: dict[str, object] | None = None) -> str:
    """Node settings as a KubeletConfiguration YAML (merged into `base`, a parsed document, if given)."""
    from . import kubelet_config

    return kubelet_config.dump(config, base)


def dump_topology(obj: object, format: str = "engine-json") -> str:
    """Export a Topology (or Node) as `engine-json`, `nrt`, `numatopo` or `synthetic`."""
    fmt = normalise(format)
    if fmt == "engine-json":
        from . import engine_json

        return engine_json.dump(obj)
    if fmt == "synthetic":
        from . import synthetic

        return synthetic.dump(obj if isinstance(obj, Topology) else getattr(obj, "topology", obj))
    if fmt == "nrt":
        from . import nrt

        return nrt.dump(obj)
    if fmt == "numatopo":
        from . import volcano_numatopo

        return volcano_numatopo.dump(obj)
    raise FormatError(f"no exporter for {fmt!r}; exporters: engine-json, nrt, numatopo, synthetic")


def _text(src: Source, fmt: str) -> str:
    if src.text is None:
        raise FormatError(f"{src.name}: {fmt} input must be text")
    return src.text


