"""A bounded, streaming, header-only tar reader for sysfs dumps.

A sysfs dump holds thousands of tiny members; `tarfile` spends ~60 µs building a TarInfo for each,
most of a dump's import time. This reader walks the 512-byte ustar/GNU/pax headers itself, yielding
`(path, kind, payload)` for the regular files the caller wants ("file") and for symbolic links ("link",
payload = target). The archive is decompressed as it is read, a megabyte at a time (gzip, bzip2, xz;
concatenated streams too), so memory holds the input, one chunk and the wanted payloads, never the
whole stream: the payload of a member nobody wants is skipped (for a plain tar, without reading it;
compressed formats cannot skip without decompressing, so its bytes are decompressed and dropped).

Bounds, each a FormatError naming the limit: members in the archive, bytes decompressed, seconds spent,
bytes of one wanted member. The first header's checksum identifies a tar stream; every size field is
parsed, so a damaged archive raises FormatError instead of reading out of range. Nothing touches disk.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import time
import zlib
from collections.abc import Callable, Iterator

from ..errors import FormatError

BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
CHUNK = 1 << 20
#: pax / GNU long-name records are read whole; a path is never this long
MAX_META_BYTES = 1 << 16


def _open(raw: bytes) -> io.BufferedIOBase:
    source = io.BytesIO(raw)  # shares the bytes, no copy
    if raw.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=source, mode="rb")
    if raw.startswith(b"BZh"):
        return bz2.BZ2File(source)
    if raw.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(source)
    return source


class _Stream:
    """The tar stream read forward in chunks, counting every decompressed byte against `limit` and the
    clock against `seconds`."""

    def __init__(self, raw: bytes, name: str, limit: int, seconds: float) -> None:
        self.file, self.plain = _open(raw), not raw.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"))
        self.size = len(raw)  # the stream's length when it is `raw` itself (plain)
        self.name, self.limit, self.deadline, self.seconds = name, limit, time.monotonic() + seconds, seconds
        self.buf, self.pos, self.total, self.offset = b"", 0, 0, 0

    def _chunk(self, size: int) -> bytes:
        try:
            chunk = self.file.read(size)
        except EOFError:
            raise FormatError(f"{self.name}: not a readable tar archive (the compressed stream is truncated)") from None
        except (OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
            raise FormatError(f"{self.name}: not a readable tar archive ({exc})") from None
        self.total += len(chunk)
        if self.total > self.limit:
            raise FormatError(f"{self.name}: decompresses to more than {self.limit >> 20} MiB")
        if time.monotonic() > self.deadline:
            raise FormatError(f"{self.name}: reading the archive took more than {self.seconds:g} s")
        return chunk

    def read(self, n: int) -> bytes:
        """Exactly `n` bytes, or fewer at the end of the stream."""
        while len(self.buf) - self.pos < n:
            chunk = self._chunk(max(CHUNK, n))
            if not chunk:
                break
            self.buf = self.buf[self.pos:] + chunk
            self.pos = 0
        out = self.buf[self.pos:self.pos + n]
        self.pos += len(out)
        self.offset += len(out)
        return out

    def skip(self, n: int) -> bool:
        """Drop `n` bytes; False when the stream ends first."""
        held = len(self.buf) - self.pos
        if n <= held:
            self.pos += n
            self.offset += n
            return True
        self.offset += held
        n -= held
        self.buf, self.pos = b"", 0
        if self.plain:  # no decompression needed: move past the payload without reading it
            end = self.size
            start = self.file.tell()
            self.file.seek(min(start + n, end))
            self.offset += min(n, end - start)
            return start + n <= end
        while n > 0:
            chunk = self._chunk(min(n, CHUNK))
            if not chunk:
                return False
            n -= len(chunk)
            self.offset += len(chunk)
        return True


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


def members(raw: bytes, name: str, wanted: Callable[[str], bool], *, max_members: int, max_bytes: int,
            max_member_bytes: int, seconds: float) -> Iterator[tuple[str, str, bytes]]:
    """Walk a (compressed) tar archive: `(path, "file", payload)` for regular files `wanted(path)` accepts
    and `(path, "link", target)` for symbolic links; directories, other types and unwanted files are
    skipped. Limits: `max_members` headers, `max_bytes` decompressed, `max_member_bytes` per wanted file,
    `seconds` in all."""
    stream = _Stream(raw, name, max_bytes, seconds)
    count = 0
    long_name: str | None = None
    long_link: str | None = None
    pax: dict[str, str] = {}
    while True:
        at = stream.offset
        header = stream.read(BLOCK)
        if len(header) < BLOCK or header == ZERO_BLOCK:
            break
        count += 1
        if count > max_members:
            raise FormatError(f"{name}: more than {max_members} archive members")
        if count == 1 and _octal(header[148:156], f"{name}: tar header") != (
                sum(header[:148]) + 256 + sum(header[156:])):
            raise FormatError(f"{name}: not a readable tar archive (bad header checksum)")
        size = _octal(header[124:136], f"{name}: tar header at byte {at}")
        padded = (size + BLOCK - 1) // BLOCK * BLOCK
        kind = header[156:157]
        if kind in (b"L", b"K", b"x"):
            if size > MAX_META_BYTES:
                raise FormatError(f"{name}: tar header at byte {at}: a {size}-byte name record")
            data = stream.read(size)
            if len(data) < size or not stream.skip(padded - size):
                raise FormatError(f"{name}: tar member at byte {at} runs past the end of the archive")
            if kind == b"L":
                long_name = _cstr(data)
            elif kind == b"K":
                long_link = _cstr(data)
            else:
                pax = _pax_path(data)
            continue
        path = _cstr(header[:100])
        if header[257:262] == b"ustar" and header[345]:
            path = f"{_cstr(header[345:500])}/{path}"
        if pax or long_name:
            path = pax.get("path", long_name or path)
        link = (pax.get("linkpath", long_link or _cstr(header[157:257]))) if kind == b"2" else ""
        long_name = long_link = None
        pax = {}
        if kind in (b"0", b"\x00", b"7") and wanted(path):
            if size > max_member_bytes:
                raise FormatError(f"{name}: archive member {path} is larger than {max_member_bytes} bytes")
            payload = stream.read(size)
            if len(payload) < size or not stream.skip(padded - size):
                raise FormatError(f"{name}: tar member at byte {at} runs past the end of the archive")
            yield path, "file", payload
            continue
        if padded and not stream.skip(padded):
            raise FormatError(f"{name}: tar member at byte {at} runs past the end of the archive")
        if kind == b"2":
            yield path, "link", link.encode()


def _cstr(field: bytes) -> str:
    return field.split(b"\x00", 1)[0].decode("utf-8", "replace")
