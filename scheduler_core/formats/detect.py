"""Format auto-detection from content (never from file names), first matching rule wins:

1. a directory, or a gzip/bzip2/xz/tar archive → `sysfs` / `sysfs-tar`;
2. text starting with `<` and holding `<topology` → `hwloc-xml`;
3. a JSON object: `kind: numaweb.topology` or a `cpus` list → `engine-json`; `machineState` →
   `memory-manager-state`; `policyName` with `defaultCpuSet`/`defaultCPUSet` → `cpu-manager-state`;
4. `available: N nodes` and `node N cpus:` lines → `numactl-hardware`;
5. YAML with `kind: NodeResourceTopology` → `nrt`; `kind: Numatopology` (or the Numatopology
   CRD) → `numatopo`; `kind: Job`, `Pod`, `Deployment` → `workload`; `kind: KubeletConfiguration`
   (YAML or JSON) → `kubelet-config`;
6. `CPU(s):` / `NUMA node…CPU(s):` / `Socket(s):` summary lines → `lscpu-text`;
7. `#` comment lines ending in a header naming a CPU column, then comma rows → `lscpu-parse`;
   a whitespace table whose header starts with CPU and names NODE/SOCKET/CORE → `lscpu-parse` (-e);
8. a line of `type:N` / bare `N` tokens (at least one with a number) → `synthetic`.

Anything else: "format not recognised", naming the formats tried.
"""

from __future__ import annotations

import re

from ..errors import FormatError
from ._documents import json_object
from ._source import Source, check_text

FORMATS = (
    "hwloc-xml", "lscpu-text", "lscpu-parse", "sysfs", "sysfs-tar", "numactl-hardware", "synthetic",
    "nrt", "numatopo", "cpu-manager-state", "memory-manager-state", "engine-json", "workload", "kubelet-config",
)
ALIASES = {
    "nrt-crd": "nrt", "numatopo-crd": "numatopo", "hwloc": "hwloc-xml", "lscpu": "lscpu-text",
    "numactl": "numactl-hardware", "json": "engine-json", "engine": "engine-json", "hwloc-synthetic": "synthetic",
    "lscpu-e": "lscpu-parse", "lscpu-p": "lscpu-parse", "volcano-job": "workload", "pod": "workload",
    "kubelet-configuration": "kubelet-config", "kubeletconfiguration": "kubelet-config",
}

_SYNTH_TOKEN = re.compile(r"^(?:\[?[A-Za-z][A-Za-z0-9]*(?::\d+)?(?:\([^()]*\))?\]?|\d+(?:\([^()]*\))?)$")
_YAML_KIND = re.compile(r"^kind:\s*['\"]?([A-Za-z]+)", re.MULTILINE)


def normalise(fmt: str) -> str:
    name = fmt.strip().lower()
    name = ALIASES.get(name, name)
    if name not in FORMATS:
        raise FormatError(f"unknown format {fmt!r}; supported formats: {', '.join(FORMATS)}")
    return name


def detect_source(src: Source) -> str:
    if src.directory is not None:
        return "sysfs"
    if src.raw is not None:
        return "sysfs-tar"
    text = src.text or ""
    check_text(text, src.name)
    head = text.lstrip()
    if not head:
        raise FormatError(f"{src.name}: empty input")
    if head.startswith("<"):
        if "<topology" in head[:100000]:
            return "hwloc-xml"
        raise FormatError(f"{src.name}: XML without a <topology> element is not a supported format")
    if head.startswith("{"):
        return _detect_json(head, src.name)
    if re.search(r"^available:\s*\d+\s+nodes", text, re.MULTILINE) and re.search(r"^node\s+\d+\s+cpus:", text,
                                                                                  re.MULTILINE):
        return "numactl-hardware"
    kind = _YAML_KIND.search(text)
    if kind and re.search(r"^apiVersion:", text, re.MULTILINE):
        k = kind.group(1)
        if k == "NodeResourceTopology":
            return "nrt"
        if k == "Numatopology":
            return "numatopo"
        if k == "CustomResourceDefinition" and "numatopologies" in text:
            return "numatopo"
        if k in ("Job", "Pod", "Deployment", "List", "StatefulSet", "ReplicaSet"):
            return "workload"
        if k == "KubeletConfiguration":
            return "kubelet-config"
        raise FormatError(f"{src.name}: Kubernetes kind {k!r} is not a supported format")
    if re.search(r"^(CPU\(s\)|Socket\(s\)|NUMA node\(s\)|NUMA node\d+ CPU\(s\)|Thread\(s\) per core):", text,
                 re.MULTILINE):
        return "lscpu-text"
    if _looks_lscpu_parse(text):
        return "lscpu-parse"
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    tokens = lines[0].split() if len(lines) == 1 else []
    if tokens and all(_SYNTH_TOKEN.match(t) for t in tokens) and any(re.search(r"\d", t) for t in tokens):
        return "synthetic"
    raise FormatError(f"{src.name}: format not recognised (tried: {', '.join(FORMATS)})")


def _detect_json(text: str, name: str) -> str:
    data = json_object(text, name)
    keys = {k.lower() for k in data}
    if data.get("kind") == "numaweb.topology" or isinstance(data.get("cpus"), list) or "topology" in keys:
        return "engine-json"
    if "machinestate" in keys:
        return "memory-manager-state"
    if "policyname" in keys and ("defaultcpuset" in keys or "entries" in keys):
        return "cpu-manager-state"
    if data.get("kind") in ("NodeResourceTopology",):
        return "nrt"
    if data.get("kind") == "Numatopology":
        return "numatopo"
    if data.get("kind") in ("Job", "Pod", "Deployment", "List"):
        return "workload"
    if data.get("kind") == "KubeletConfiguration":
        return "kubelet-config"
    raise FormatError(f"{name}: JSON object with keys {sorted(data)[:6]} is not a supported format")


def _looks_lscpu_parse(text: str) -> bool:
    header = None
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            header = s
            continue
        if header is not None:
            cols = [c.strip().upper() for c in header.lstrip("#").split(",")]
            return "CPU" in cols and "," in s
        cols = s.upper().split()
        return bool(cols) and cols[0] == "CPU" and any(c in cols for c in ("NODE", "SOCKET", "CORE"))
    if header is not None:  # a header and no rows: still lscpu, so its importer can say what is missing
        cols = [c.strip().upper() for c in header.lstrip("#").split(",")]
        return "CPU" in cols and len(cols) > 1
    return False
