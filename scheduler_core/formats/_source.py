"""An importer's input read with the size cap applied before any parsing: text, the raw bytes of an archive,
or a directory."""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

from ..errors import FormatError

#: Largest input accepted, checked before any parsing (a real hwloc XML of a 400-thread machine
#: with PCI devices is well under 1 MiB).
MAX_INPUT_BYTES = 16 * 2**20


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
