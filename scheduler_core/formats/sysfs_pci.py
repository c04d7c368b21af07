"""A sysfs tree's PCI functions: read from a folder (`bus/pci/devices/<bus id>/`, links followed only inside
the tree) or kept from an archive (`devices/pci*/.../<bus id>/`), then turned into the topology's devices.

Every PCI function whose class hwloc (and so lstopo) counts as important — storage,
network, display, processor (co-processors), processing accelerators, fibre channel, InfiniBand,
CXL memory, unclassified — becomes a device; bridges do not. Its id is the bus id, its NUMA node
`numa_node`; when that is -1 (or absent) the NUMA nodes whose CPUs `local_cpus` names, as hwloc
places it, unless those are every node (then none: no NUMA affinity). Its resource is inferred from
class and vendor as for hwloc XML (display and accelerators by vendor, `nvidia.com/gpu` ...;
network `hwloc/nic`, InfiniBand (0207, 0c06) or a network function with an `infiniband/` folder
`hwloc/rdma`; co-processors `hwloc/coproc`; storage `hwloc/storage`; others `hwloc/pci`), flagged
`device_resources`.
Every function read, bridges included, is listed in `extra["pci_devices"]` (bus id, class,
vendor, device, numa).
"""

from __future__ import annotations

import os
import pathlib
import re

from ..errors import FormatError
from ..model.topology import Device
from ._draft import Draft
from ._values import parse_hex_mask, parse_int
from .hwloc_devices import GPU_VENDORS

BUS_ID = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
#: a PCI function's file in an archive: under its bus folder (`sys/devices/pci0000:00/.../<bus id>/`)
PCI_FILE = re.compile(rf"(?:^|/)sys/(?:bus/pci/devices|devices/pci[0-9a-fA-F:]+(?:/{BUS_ID})*)/({BUS_ID})/"
                      r"(class|vendor|device|numa_node|local_cpus|infiniband/[^/]+/node_type)$")
PCI_FIELDS = ("class", "vendor", "device", "numa_node", "local_cpus")
#: PCI classes hwloc keeps by default (its "important" filter, without bridges): base classes, then classes
_IMPORTANT_BASES = (0x00, 0x01, 0x02, 0x03, 0x0B, 0x12)
_IMPORTANT_CLASSES = (0x0C04, 0x0C06, 0x0502)


def pci_key(bus_id: str, fname: str) -> str:
    """The key a PCI function's file is kept under, whichever path it was read from."""
    return f"pci/{bus_id.lower()}/{'infiniband' if fname.startswith('infiniband/') else fname}"


def read_pci(sys_dir: pathlib.Path, max_entries: int, max_bytes: int) -> dict[str, str]:
    """Each PCI function's files from `bus/pci/devices/<bus id>` (links into `devices/pci*`, followed only
    when they stay inside `sys_dir`), at most `max_entries` functions and `max_bytes` a file."""
    files: dict[str, str] = {}
    bus = sys_dir / "bus" / "pci" / "devices"
    if not bus.is_dir():
        return files
    inside = os.path.realpath(sys_dir)
    for entry in sorted(bus.iterdir())[:max_entries]:
        if not re.fullmatch(BUS_ID, entry.name):
            continue
        real = os.path.realpath(entry)
        if not (real + "/").startswith(inside + "/"):
            continue
        for fname in PCI_FIELDS:
            try:
                with open(os.path.join(real, fname), "rb") as fh:
                    files[pci_key(entry.name, fname)] = fh.read(max_bytes).decode("ascii", "replace")
            except OSError:
                continue
        if os.path.isdir(os.path.join(real, "infiniband")):
            files[pci_key(entry.name, "infiniband/")] = ""
    return files


def pci_devices(files: dict[str, str], numa_of: dict[int, int], name: str, draft: Draft) -> None:
    """The PCI functions read (`extra["pci_devices"]`) and, for those of an important class, the
    topology's devices (the rule in the module docstring)."""
    numa_ids = set(numa_of.values()) | set(draft.numa_memory)
    functions: dict[str, dict[str, str]] = {}
    for key, text in files.items():
        if key.startswith("pci/"):
            _, bus_id, fname = key.split("/", 2)
            functions.setdefault(bus_id, {})[fname] = text.replace("\x00", "").strip()
    listed: list[dict[str, object]] = []
    for bus_id in sorted(functions):
        entry = functions[bus_id]
        where = f"{name}: PCI {bus_id}"
        pci_class = _hex(entry.get("class", ""), f"{where}/class") >> 8 if entry.get("class") else None
        vendor = f"{_hex(entry['vendor'], f'{where}/vendor'):04x}" if entry.get("vendor") else None
        device = f"{_hex(entry['device'], f'{where}/device'):04x}" if entry.get("device") else None
        node = parse_int(entry["numa_node"], f"{where}/numa_node", minimum=-1) if entry.get("numa_node") else -1
        numa: tuple[int, ...] | None = (node,) if node in numa_ids else None
        if node >= 0 and numa is None:
            draft.notes.append(f"PCI {bus_id}: numa_node {node} is not a NUMA node of this machine; no locality")
        elif node < 0 and entry.get("local_cpus"):
            near = parse_hex_mask(entry["local_cpus"], f"{where}/local_cpus")
            nodes = tuple(sorted({n for cpu, n in numa_of.items() if near >> cpu & 1}))
            numa = nodes if nodes and len(nodes) < len(set(numa_of.values())) else None
        listed.append({"bus_id": bus_id, "class": None if pci_class is None else f"{pci_class:04x}",
                       "vendor": vendor, "device": device, "numa": None if numa is None else list(numa)})
        if pci_class is None or not (pci_class >> 8 in _IMPORTANT_BASES or pci_class in _IMPORTANT_CLASSES):
            continue
        draft.devices.append(Device(bus_id, _resource(pci_class, vendor, "infiniband" in entry), numa, True,
                                    f"PCI {pci_class:04x} [{vendor or '?'}:{device or '?'}]"))
        draft.inferred.add("device_resources")
    if listed:
        draft.extra["pci_devices"] = listed


def _hex(text: str, what: str) -> int:
    try:
        return int(text.strip(), 16)
    except ValueError:
        raise FormatError(f"{what}: {text.strip()[:40]!r} is not a hexadecimal number") from None


def _resource(pci_class: int, vendor: str | None, infiniband: bool) -> str:
    """The device-plugin resource of one PCI function (see the module docstring)."""
    base = pci_class >> 8
    if base in (0x03, 0x12):
        return GPU_VENDORS.get(vendor or "", "hwloc/gpu")
    if base == 0x02 or pci_class in (0x0C04, 0x0C06):
        return "hwloc/rdma" if infiniband or pci_class in (0x0207, 0x0C06) else "hwloc/nic"
    if base == 0x0B:
        return "hwloc/coproc"
    return "hwloc/storage" if base == 0x01 else "hwloc/pci"
