"""A bounded, header-only tar reader for sysfs dumps.

A sysfs dump holds thousands of tiny members; `tarfile` spends ~60 µs building a TarInfo for each,
most of a dump's import time. This reader decompresses the archive once (size-capped before any
byte is parsed) and walks the 512-byte ustar/GNU/pax headers itself, yielding
`(path, kind, payload)` for regular files ("file") and symbolic links ("link", payload = target).
The first header's checksum identifies a tar stream; every size field is parsed and bounded, so a
damaged archive raises FormatError instead of reading out of range. Nothing is written to disk.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Iterator

from ..errors import FormatError

BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)


def decompress(raw: bytes, name: str, limit: int) -> bytes:
    """gzip / bzip2 / xz / plain tar bytes → the tar stream, refusing more than `limit` bytes
    (concatenated streams, as `cat a.gz b.gz` makes, are read one after the other)."""
    if raw.startswith(b"\x1f\x8b"):
        def make():
            return zlib.decompressobj(wbits=31)
    elif raw.startswith(b"BZh"):
        make = bz2.BZ2Decompressor
    elif raw.startswith(b"\xfd7zXZ\x00"):
        make = lzma.LZMADecompressor
    else:
        return raw
    out = bytearray()
    data = raw
    try:
        while data.strip(b"\x00"):
            dec = make()
            out += dec.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                break
            if not dec.eof:
                raise FormatError(f"{name}: not a readable tar archive (the compressed stream is truncated)")
            data = dec.unused_data
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise FormatError(f"{name}: not a readable tar archive ({exc})") from None
    if len(out) > limit:
        raise FormatError(f"{name}: decompresses to more than {limit >> 20} MiB")
    return bytes(out)


def _octal(field: bytes, what: str) -> int:
    try:
        return int(field.split(b"\x00", 1)[0].strip() or b"0", 8)
    except ValueError:
        if field[:1] and field[0] & 0x80:
            raise FormatError(f"{what}: size in base-256 (a member larger than 8 GiB)") from None
        raise FormatError(f"{what}: {field[:20]!r} is not an octal number") from None


def _pax_path(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        try:
            length = int(data[pos:space])
        except ValueError:
            break
        if length <= 0:
            break
        record = data[space + 1:pos + length - 1]
        key, _, value = record.partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        pos += length
    return out


def members(tar: bytes, name: str, max_members: int) -> Iterator[tuple[str, str, bytes]]:
    """Walk a tar stream: `(path, "file" | "link", payload)`; directories and other types are skipped."""
    pos = 0
    count = 0
    long_name: str | None = None
    long_link: str | None = None
    pax: dict[str, str] = {}
    end = len(tar)
    while pos + BLOCK <= end:
        if tar[pos] == 0 and tar[pos:pos + BLOCK] == ZERO_BLOCK:
            break
        count += 1
        if count > max_members:
            raise FormatError(f"{name}: more than {max_members} archive members")
        if count == 1:
            header = tar[:BLOCK]
            if _octal(header[148:156], f"{name}: tar header") != sum(header[:148]) + 256 + sum(header[156:]):
                raise FormatError(f"{name}: not a readable tar archive (bad header checksum)")
        size = _octal(tar[pos + 124:pos + 136], f"{name}: tar header at byte {pos}")
        kind = tar[pos + 156:pos + 157]
        data_start = pos + BLOCK
        data_end = data_start + size
        if data_end > end:
            raise FormatError(f"{name}: tar member at byte {pos} runs past the end of the archive")
        header_at = pos
        pos = data_start + (size + BLOCK - 1) // BLOCK * BLOCK
        if kind == b"5":
            continue
        if kind == b"L":
            long_name = _cstr(tar[data_start:data_end])
            continue
        if kind == b"K":
            long_link = _cstr(tar[data_start:data_end])
            continue
        if kind in (b"x", b"g"):
            if kind == b"x":
                pax = _pax_path(tar[data_start:data_end])
            continue
        if kind not in (b"0", b"\x00", b"7", b"2"):
            long_name = long_link = None
            pax = {}
            continue
        path = _cstr(tar[header_at:header_at + 100])
        if tar[header_at + 257:header_at + 262] == b"ustar" and tar[header_at + 345]:
            path = f"{_cstr(tar[header_at + 345:header_at + 500])}/{path}"
        path = pax.get("path", long_name or path)
        if kind == b"2":
            link = pax.get("linkpath", long_link or _cstr(tar[header_at + 157:header_at + 257]))
            yield path, "link", link.encode()
        else:
            yield path, "file", tar[data_start:data_end]
        long_name = long_link = None
        pax = {}


def _cstr(field: bytes) -> str:
    return field.split(b"\x00", 1)[0].decode("utf-8", "replace")
