"""hwloc XML's devices (hwloc_xml reads the rest of the file).

- Devices: one physical device shows up in hwloc as several OS devices (a GPU as cuda0, nvml0,
  opencl0d0 and card0; an RDMA NIC as eth2, ib0 and mlx4_0), so the engine gets one `Device` per
  PCI function (PCIDev) that has at least one OSDev of kind gpu, coproc, network or openfabrics
  below it (v1/v2 `osdev_type` enum; v3 bitmask). Its id is the PCI bus id, its name a label from
  the PCIVendor/PCIDevice infos (else the OSDev's GPUVendor/GPUModel, else the vendor id) and the
  OSDev names, e.g. "NVIDIA Corporation Tesla P100-SXM2-16GB (cuda0, nvml0, opencl0d0)". SR-IOV
  functions without an OS device are not devices. Such an OSDev outside any PCIDev stays one
  `Device` on its own (id = its name, resource `hwloc/<kind>`).
- Device resource names are inferred (flagged `device_resources` in `inferred`) from the class and
  vendor in `pci_type` ("CCSS [VVVV:DDDD] [SSSS:ssss] rr", v3 adds a byte): class 03xx (display)
  and 12xx (processing accelerator): vendor 10de → `nvidia.com/gpu`, 1002 → `amd.com/gpu`, 8086 →
  `gpu.intel.com/i915`, any other → `hwloc/gpu`; class 02xx (network, 0207 InfiniBand included)
  and 0c06 (InfiniBand on the serial-bus class): `hwloc/rdma` when an openfabrics OSDev is below,
  else `hwloc/nic`; anything else (or no readable `pci_type`): `hwloc/<kind>` of the most specific
  kind among its OSDevs (openfabrics, gpu, coproc, network, in that order).
- Device NUMA: the NUMA nodes of the nodeset (else cpuset) of the first non-I/O ancestor.
- Every OSDev of any kind is listed in `extra["os_devices"]`: name, kind (most specific), kinds (all
  v3 bits), subtype, pci_busid (of the PCIDev above it, else None), numa (list or None) and device
  (the id of the engine `Device` it belongs to, else None).
"""

from __future__ import annotations

import re

from ..model.bitmask import bits_of as bits
from ..model.topology import Device
from ._values import parse_hex_mask, parse_int
from .hwloc_objects import Element, NUMAInfo

V2_OSDEV = {0: "block", 1: "gpu", 2: "network", 3: "openfabrics", 4: "dma", 5: "coproc"}
V3_OSDEV_BITS = ((32, "openfabrics"), (4, "gpu"), (8, "coproc"), (16, "network"), (1, "storage"),
                 (2, "memory"), (64, "dma"))
#: OSDev kinds that make a schedulable device, most specific first (hwloc v3's bit precedence).
DEVICE_KINDS = ("openfabrics", "gpu", "coproc", "network")
#: PCI vendor id → the resource name its GPU device plugin advertises.
GPU_VENDORS = {"10de": "nvidia.com/gpu", "1002": "amd.com/gpu", "8086": "gpu.intel.com/i915"}
#: Vendor names for labels when the file carries no PCIVendor info (v3 exports drop it).
VENDOR_NAMES = {"10de": "NVIDIA", "1002": "AMD", "8086": "Intel", "15b3": "Mellanox", "14e4": "Broadcom",
                "1137": "Cisco", "1077": "QLogic", "1014": "IBM", "1022": "AMD", "19e5": "Huawei"}
PCI_TYPE = re.compile(r"\s*([0-9A-Fa-f]{4})?\s*(?:\[\s*([0-9A-Fa-f]{4})\s*:\s*([0-9A-Fa-f]{4})\s*\])?")


def _osdev_kinds(el: Element, major: int) -> list[str]:
    """All kinds an OSDev declares, most specific first (v1/v2: one enum value; v3: a bitmask)."""
    raw = el.get("osdev_type")
    if raw is None:
        return []
    value = parse_int(raw, f"hwloc XML: osdev_type of OSDev {el.get('name')!r}")
    if major >= 3:
        return [kind for bit, kind in V3_OSDEV_BITS if value & bit]
    return [V2_OSDEV[value]] if value in V2_OSDEV else []


def _locality(anchor: Element, numa_info: dict[int, NUMAInfo], cache: dict[int, tuple[int, ...] | None],
              name: str) -> tuple[int, ...] | None:
    """NUMA nodes of an I/O object: the nodeset (else the cpuset) of its first non-I/O ancestor."""
    key = id(anchor)
    if key in cache:
        return cache[key]
    numa: tuple[int, ...] | None = None
    nodeset, cpuset = anchor.get("nodeset"), anchor.get("cpuset")
    if nodeset is not None and numa_info:
        numa = tuple(n for n in bits(parse_hex_mask(nodeset, f"hwloc XML: nodeset above {name}"))
                     if n in numa_info) or None
    elif cpuset and numa_info:
        cpus = parse_hex_mask(cpuset, f"hwloc XML: cpuset above {name}")
        numa = tuple(sorted(n for n, info in numa_info.items() if info.cpuset & cpus)) or None
    cache[key] = numa
    return numa


def parse_pci_type(text: str | None) -> tuple[int | None, str | None, str | None]:
    """(class, vendor, device) from `pci_type` ("CCSS [VVVV:DDDD] [SSSS:ssss] rr", v3 adds a byte);
    parts that cannot be read are None."""
    match = PCI_TYPE.match(text or "")
    if not match:
        return None, None, None
    cls, vendor, device = match.groups()
    return (int(cls, 16) if cls else None), (vendor.lower() if vendor else None), (device.lower() if device else None)


def device_resource(pci_class: int | None, vendor: str | None, kinds: set[str]) -> str:
    """Device-plugin resource name of one PCI function (the rule in the module docstring)."""
    base = None if pci_class is None else pci_class >> 8
    if base in (0x03, 0x12):
        return GPU_VENDORS.get(vendor or "", "hwloc/gpu")
    if base == 0x02 or pci_class == 0x0C06:
        return "hwloc/rdma" if "openfabrics" in kinds else "hwloc/nic"
    return f"hwloc/{next(k for k in DEVICE_KINDS if k in kinds)}"


def _infos(el: Element) -> dict[str, str]:
    infos: dict[str, str] = {}
    for c in el:
        name = c.get("name") if c.tag == "info" else None
        if name:
            infos[name] = c.get("value", "")
    return infos


def _label(pcidev: Element, vendor: str | None, device: str | None, members: list[Element]) -> str:
    infos = _infos(pcidev)
    for el in members:
        for k, v in _infos(el).items():
            infos.setdefault(k, v)
    who = (infos.get("PCIVendor") or infos.get("GPUVendor") or VENDOR_NAMES.get(vendor or "")
           or (f"vendor {vendor}" if vendor else "")).strip()
    what = (infos.get("PCIDevice") or infos.get("GPUModel") or (f"device {device}" if device else "")).strip()
    head = " ".join(p for p in (who, what) if p) or "PCI device"
    names = sorted(el.get("name") or "?" for el in members)
    return f"{head} ({', '.join(names)})"


#: One OSDev of a device group: the element, the PCIDev above it, its `os_devices` record, NUMA nodes and kinds.
_Member = tuple[Element, Element | None, dict[str, object], tuple[int, ...] | None, list[str]]


def read_devices(osdevs: list[tuple[Element, Element, Element | None]], major: int,
                 numa_info: dict[int, NUMAInfo]) -> tuple[list[Device], list[dict[str, object]]]:
    """Engine devices (one per PCI function holding a gpu/coproc/network/openfabrics OSDev; one per
    such OSDev outside any PCIDev) and the per-OSDev list kept in `extra["os_devices"]`."""
    cache: dict[int, tuple[int, ...] | None] = {}
    records: list[dict[str, object]] = []
    groups: dict[int, list[_Member]] = {}
    for el, anchor, pcidev in osdevs:
        kinds = _osdev_kinds(el, major)
        name = el.get("name") or f"osdev{len(records)}"
        numa = _locality(anchor, numa_info, cache, name)
        rec: dict[str, object] = {
            "name": name, "kind": kinds[0] if kinds else None, "kinds": kinds, "subtype": el.get("subtype"),
            "pci_busid": pcidev.get("pci_busid") if pcidev is not None else None,
            "numa": list(numa) if numa is not None else None, "device": None}
        records.append(rec)
        if kinds and kinds[0] in DEVICE_KINDS:
            key = id(pcidev) if pcidev is not None else id(el)
            groups.setdefault(key, []).append((el, pcidev, rec, numa, kinds))
    out = []
    ids: set[str] = set()
    for members in groups.values():
        el, pcidev, rec, numa, kinds = members[0]
        if pcidev is not None:
            pci_class, vendor, device = parse_pci_type(pcidev.get("pci_type"))
            resource = device_resource(pci_class, vendor, {k for m in members for k in m[4]})
            base_id = pcidev.get("pci_busid") or str(rec["name"])
            label = _label(pcidev, vendor, device, [m[0] for m in members])
        else:
            resource, base_id, label = f"hwloc/{kinds[0]}", str(rec["name"]), str(rec["name"])
        dev_id = base_id
        n = 1
        while dev_id in ids:
            n += 1
            dev_id = f"{base_id}#{n}"
        ids.add(dev_id)
        for m in members:
            m[2]["device"] = dev_id
        out.append(Device(dev_id, resource, numa, True, label))
    return out, records
