"""hwloc XML's objects as every part of the reader sees them: the file parsed safely, an object's type under
its v2 name (v1's `Socket`, `Node` and generic `Cache` with a `depth`), its place for error messages, and a
NUMANode as read."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ..errors import FormatError

Element = ET.Element


@dataclass
class NUMAInfo:
    """A NUMANode object as read: memory, hugepages, its cpuset and whether it is a memory-only kind."""

    memory: int
    hugepages: dict[str, int]
    cpuset: int
    memory_only: bool


def parse_xml(text: str) -> Element:
    """Parse with defusedxml (no entity expansion, no external entities or DTD fetching)."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        root: Element = fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise FormatError(f"hwloc XML refused: {exc} (entity declarations and external references are "
                          "not accepted)") from None
    except ET.ParseError as exc:
        line, col = getattr(exc, "position", (0, 0))
        raise FormatError(f"hwloc XML is not well-formed at line {line}, column {col + 1}: "
                          f"{str(exc).split(':')[0]}") from None
    except RecursionError:
        raise FormatError("hwloc XML nested too deeply") from None
    return root


def object_type(el: Element) -> str:
    """The object's type, v1 names given their v2 form."""
    t = el.get("type", "")
    if t == "Socket":
        return "Package"
    if t == "Cache":
        depth = el.get("depth", "")
        return f"L{depth}Cache" if depth.isdigit() else "Cache"
    if t == "Node":
        return "NUMANode"
    return t


def where(el: Element, index: int) -> str:
    """An object as an error message names it."""
    attrs = " ".join(f'{k}="{el.get(k)}"' for k in ("type", "os_index", "name") if el.get(k) is not None)
    return f"<object {attrs}> (object #{index})"


def numa_id(numa: Element) -> int:
    """The os_index of a NUMANode the reader has read (and so checked)."""
    return int(numa.get("os_index", ""))
