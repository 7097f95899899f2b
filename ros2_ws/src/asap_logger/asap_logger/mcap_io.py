"""A small MCAP writer with bounded chunks and a tolerant single-pass scanner (no ROS).

Writer layout (crash-safe by construction): magic, Header, then Schema and Channel records at the
top level of the data section (never inside a chunk, so a crash cannot take them), then Chunks
each followed by their MessageIndex records, each chunk written with one ``write`` and flushed.
``close()`` appends DataEnd, the summary (schemas, channels, statistics, chunk and metadata
indexes, summary offsets) and the Footer. A file cut anywhere after the last flushed chunk still
reads up to that chunk; ``summary_bytes`` rebuilds the missing tail (``asap-bag reindex``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from asap_logger.errors import CorruptChunkError, TruncatedFileError

MAGIC = b"\x89MCAP0\r\n"
OP_HEADER, OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
OP_MESSAGE_INDEX, OP_CHUNK_INDEX, OP_STATISTICS, OP_METADATA = 0x07, 0x08, 0x0B, 0x0C
OP_METADATA_INDEX, OP_SUMMARY_OFFSET, OP_DATA_END = 0x0D, 0x0E, 0x0F
_MSG = struct.Struct("<BQHIQQ")  # opcode, record length, channel, sequence, log time, publish time
_REC = struct.Struct("<BQ")
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
COMPRESSIONS = ("", "zstd", "lz4")


# --- records -------------------------------------------------------------------------------------
def _s(text: str) -> bytes:
    raw = text.encode()
    return _U32.pack(len(raw)) + raw


def _map(entries: dict[str, str]) -> bytes:
    body = b"".join(_s(k) + _s(v) for k, v in entries.items())
    return _U32.pack(len(body)) + body


def record(opcode: int, payload: bytes) -> bytes:
    """One MCAP record: opcode, u64 length, payload."""
    return _REC.pack(opcode, len(payload)) + payload


@dataclass(frozen=True)
class Schema:
    """An MCAP schema record."""

    id: int
    name: str
    encoding: str
    data: bytes

    def encode(self) -> bytes:
        """The record bytes."""
        payload = _U16.pack(self.id) + _s(self.name) + _s(self.encoding) + _U32.pack(len(self.data))
        return record(OP_SCHEMA, payload + self.data)


@dataclass(frozen=True)
class Channel:
    """An MCAP channel record."""

    id: int
    schema_id: int
    topic: str
    message_encoding: str
    metadata: dict[str, str]

    def encode(self) -> bytes:
        """The record bytes."""
        payload = struct.pack("<HH", self.id, self.schema_id) + _s(self.topic) + _s(self.message_encoding)
        return record(OP_CHANNEL, payload + _map(self.metadata))


@dataclass
class ChunkInfo:
    """Where a complete chunk lies and what it holds (one ChunkIndex record of the summary)."""

    start_time: int
    end_time: int
    offset: int
    length: int
    index_offsets: dict[int, int]
    index_length: int
    compression: str
    compressed_size: int
    uncompressed_size: int
    counts: dict[int, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The ChunkIndex record bytes."""
        offsets = b"".join(struct.pack("<HQ", c, o) for c, o in self.index_offsets.items())
        payload = struct.pack("<QQQQ", self.start_time, self.end_time, self.offset, self.length)
        payload += _U32.pack(len(offsets)) + offsets + _U64.pack(self.index_length) + _s(self.compression)
        return record(
            OP_CHUNK_INDEX, payload + struct.pack("<QQ", self.compressed_size, self.uncompressed_size)
        )


@dataclass
class FileContents:
    """What one pass over an .mcap file found."""

    path: Path
    schemas: dict[int, Schema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    metadata: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    metadata_index: list[bytes] = field(default_factory=list)
    """MetadataIndex records for the metadata found (to rebuild a summary)."""
    chunks: list[ChunkInfo] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)
    start_time: int = 0
    end_time: int = 0
    complete: bool = False
    """Footer and closing magic present: the writer closed the file."""
    valid_end: int = 0
    """Byte offset just after the last complete data-section record."""
    problems: list[str] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        """Messages in complete chunks."""
        return sum(self.counts.values())


# --- writer --------------------------------------------------------------------------------------
def _compressor(name: str) -> Callable[[bytes], bytes]:
    if name == "":
        return bytes
    if name == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=1).compress
    if name == "lz4":
        import lz4.frame

        return lz4.frame.compress
    raise ValueError(f"compression must be one of {COMPRESSIONS}, got {name!r}")


class McapFileWriter:
    """Writes one MCAP file; chunks close when ``flush_chunk`` is called or exceed ``chunk_bytes``."""

    def __init__(
        self,
        path: Path,
        *,
        library: str,
        chunk_bytes: int = 4 << 20,
        compression: str = "",
        fsync: bool = False,
    ) -> None:
        self.path = path
        self._compress = _compressor(compression)
        self._compression = compression
        self._chunk_bytes = chunk_bytes
        self._fsync = fsync
        self._file = path.open("xb")  # never overwrite a recording
        self._schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._metadata_index: list[bytes] = []
        self.chunks: list[ChunkInfo] = []
        self.counts: dict[int, int] = {}
        self.start_time, self.end_time = 0, 0
        self._reset_chunk()
        self._write(MAGIC + record(OP_HEADER, _s("ros2") + _s(library)))
        self.size = len(MAGIC)

    def _reset_chunk(self) -> None:
        self._buf = bytearray()
        self._index: dict[int, array] = {}
        self._chunk_start, self._chunk_end = 2**64 - 1, 0

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        self.size = self._file.tell()

    def add_schema(self, schema: Schema) -> None:
        """Write a schema record at the top level (before any message that uses it)."""
        self._schemas[schema.id] = schema
        self._write(schema.encode())

    def add_channel(self, channel: Channel) -> None:
        """Write a channel record at the top level."""
        self._channels[channel.id] = channel
        self.counts.setdefault(channel.id, 0)
        self._write(channel.encode())

    def add_metadata(self, name: str, entries: dict[str, str]) -> None:
        """Write a Metadata record (indexed in the summary)."""
        self.flush_chunk()
        data = record(OP_METADATA, _s(name) + _map(entries))
        self._metadata_index.append(
            record(OP_METADATA_INDEX, struct.pack("<QQ", self._file.tell(), len(data)) + _s(name))
        )
        self._write(data)

    def add_message(
        self, channel_id: int, sequence: int, log_time: int, publish_time: int, data: bytes | memoryview
    ) -> None:
        """Append one message to the open chunk (the hot path: two buffer appends)."""
        buf = self._buf
        offsets = self._index.get(channel_id)
        if offsets is None:
            offsets = self._index[channel_id] = array("Q")
        offsets.append(log_time)
        offsets.append(len(buf))
        buf += _MSG.pack(OP_MESSAGE, 22 + len(data), channel_id, sequence, log_time, publish_time)
        buf += data
        self._chunk_start = min(self._chunk_start, log_time)
        self._chunk_end = max(self._chunk_end, log_time)
        if len(buf) >= self._chunk_bytes:
            self.flush_chunk()

    @property
    def pending_bytes(self) -> int:
        """Bytes of messages in the open chunk."""
        return len(self._buf)

    def flush_chunk(self) -> None:
        """Close the open chunk: write it and its message indexes in one write, then flush."""
        if not self._buf:
            return
        raw = bytes(self._buf)
        body = self._compress(raw)
        head = struct.pack("<QQQI", self._chunk_start, self._chunk_end, len(raw), zlib.crc32(raw))
        chunk = record(OP_CHUNK, head + _s(self._compression) + _U64.pack(len(body)) + body)
        offset = self._file.tell()
        pos = offset + len(chunk)
        indexes, index_offsets, counts = [], {}, {}
        for cid, entries in self._index.items():
            rec = record(OP_MESSAGE_INDEX, _U16.pack(cid) + _U32.pack(len(entries) * 8) + entries.tobytes())
            index_offsets[cid], counts[cid] = pos, len(entries) // 2
            pos += len(rec)
            indexes.append(rec)
        info = ChunkInfo(
            self._chunk_start,
            self._chunk_end,
            offset,
            len(chunk),
            index_offsets,
            pos - offset - len(chunk),
            self._compression,
            len(body),
            len(raw),
            counts,
        )
        self._write(chunk + b"".join(indexes))
        if self._fsync:
            os.fsync(self._file.fileno())
        self._account(info)
        self._reset_chunk()

    def _account(self, info: ChunkInfo) -> None:
        if not self.chunks:
            self.start_time = info.start_time
        self.start_time = min(self.start_time, info.start_time)
        self.end_time = max(self.end_time, info.end_time)
        for cid, n in info.counts.items():
            self.counts[cid] = self.counts.get(cid, 0) + n
        self.chunks.append(info)

    def close(self) -> None:
        """Flush the open chunk, write the summary and footer, close the file."""
        self.flush_chunk()
        tail = summary_bytes(
            self._file.tell(),
            self._schemas,
            self._channels,
            self.chunks,
            self.counts,
            (self.start_time, self.end_time),
            self._metadata_index,
        )
        self._write(tail)
        if self._fsync:
            os.fsync(self._file.fileno())
        self._file.close()

    def abort(self) -> None:
        """Close the file descriptor without a summary (after an I/O error); never raises."""
        with contextlib.suppress(OSError):
            self._file.close()


def summary_bytes(
    data_end: int,
    schemas: dict[int, Schema],
    channels: dict[int, Channel],
    chunks: list[ChunkInfo],
    counts: dict[int, int],
    span: tuple[int, int],
    metadata_index: list[bytes],
) -> bytes:
    """DataEnd + summary section + Footer + magic for a data section ending at ``data_end``."""
    start = data_end + len(record(OP_DATA_END, b"\0" * 4))
    groups: list[tuple[int, bytes]] = [
        (OP_SCHEMA, b"".join(s.encode() for s in schemas.values())),
        (OP_CHANNEL, b"".join(c.encode() for c in channels.values())),
        (
            OP_STATISTICS,
            record(OP_STATISTICS, _statistics(schemas, channels, chunks, counts, span, len(metadata_index))),
        ),
        (OP_CHUNK_INDEX, b"".join(c.encode() for c in chunks)),
        (OP_METADATA_INDEX, b"".join(metadata_index)),
    ]
    summary, offsets, pos = b"", b"", start
    for opcode, body in groups:
        if body:
            offsets += record(OP_SUMMARY_OFFSET, struct.pack("<BQQ", opcode, pos, len(body)))
            summary += body
            pos += len(body)
    summary += offsets
    footer_head = struct.pack("<BQQQ", OP_FOOTER, 20, start, pos)
    crc = zlib.crc32(footer_head, zlib.crc32(summary))
    return record(OP_DATA_END, _U32.pack(0)) + summary + footer_head + _U32.pack(crc) + MAGIC


def _statistics(
    schemas: dict,
    channels: dict,
    chunks: list[ChunkInfo],
    counts: dict[int, int],
    span: tuple[int, int],
    n_metadata: int,
) -> bytes:
    per_channel = b"".join(struct.pack("<HQ", c, n) for c, n in sorted(counts.items()))
    head = struct.pack(
        "<QHIIII", sum(counts.values()), len(schemas), len(channels), 0, n_metadata, len(chunks)
    )
    return head + struct.pack("<QQ", *span) + _U32.pack(len(per_channel)) + per_channel


# --- scanner -------------------------------------------------------------------------------------
class _Cursor:
    """Reads MCAP primitives from a buffer; raises ValueError past ``end``."""

    def __init__(self, buf: bytes | mmap.mmap | memoryview, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def take(self, n: int) -> int:
        pos = self.pos
        if pos + n > self.end:
            raise ValueError(f"field of {n} bytes overruns its record at byte {pos}")
        self.pos = pos + n
        return pos

    def u16(self) -> int:
        return _U16.unpack_from(self.buf, self.take(2))[0]

    def u32(self) -> int:
        return _U32.unpack_from(self.buf, self.take(4))[0]

    def u64(self) -> int:
        return _U64.unpack_from(self.buf, self.take(8))[0]

    def raw(self, n: int) -> bytes:
        pos = self.take(n)
        return bytes(self.buf[pos : pos + n])

    def str(self) -> str:
        return self.raw(self.u32()).decode()

    def map(self) -> dict[str, str]:
        end = self.u32() + self.pos
        out = {}
        while self.pos < end:
            key = self.str()
            out[key] = self.str()
        return out


def _schema(cur: _Cursor) -> Schema:
    sid, name, enc = cur.u16(), cur.str(), cur.str()
    return Schema(sid, name, enc, cur.raw(cur.u32()))


def _channel(cur: _Cursor) -> Channel:
    cid, sid = cur.u16(), cur.u16()
    return Channel(cid, sid, cur.str(), cur.str(), cur.map())


Wanted = Callable[[Channel, Schema | None], bool]
"""Called once per channel (with its schema) when the scanner meets it: keep its messages?"""
MessageSink = Callable[[int, int, int, memoryview], None]
"""Called with (channel id, log time, publish time, data) for each message of a wanted channel."""


def scan(
    path: Path, *, sink: MessageSink | None = None, wanted: Wanted | None = None, strict: bool = True
) -> FileContents:
    """Read an .mcap file in one pass, tolerating a cut-off end.

    Messages of channels for which ``wanted`` holds go to ``sink``. A damaged chunk raises
    ``CorruptChunkError`` when ``strict``, else is skipped and listed in ``problems``. A file that
    ends inside a record is read up to its last complete record (``complete`` stays False).
    """
    out = FileContents(path)
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < len(MAGIC):
            raise TruncatedFileError(f"{path}: {size} bytes, not an MCAP file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if mm[:8] != MAGIC:
                raise CorruptChunkError(str(path), -1, 0, "no MCAP magic at the start")
            _scan_records(mm, size, out, sink, wanted, strict)
    if not out.complete and strict is False:
        out.problems.append(f"{path.name}: no footer; data after byte {out.valid_end} was cut off")
    return out


def _scan_records(
    mm: mmap.mmap, size: int, out: FileContents, sink: MessageSink | None, wanted: Wanted | None, strict: bool
) -> None:
    pos, in_summary, keep = 8, False, set()
    attach: ChunkInfo | None = None  # the chunk whose MessageIndex records follow
    out.valid_end = pos
    while pos + 9 <= size:
        opcode, length = _REC.unpack_from(mm, pos)
        body, end = pos + 9, pos + 9 + length
        if end > size:
            return  # cut off mid-record: everything before ``pos`` is intact
        cur = _Cursor(mm, body, end)
        if opcode == OP_FOOTER:
            out.complete = mm[end : end + 8] == MAGIC
            return
        if opcode == OP_DATA_END:
            in_summary = True
        elif opcode == OP_SCHEMA:
            schema = _schema(cur)
            out.schemas.setdefault(schema.id, schema)
        elif opcode == OP_CHANNEL:
            channel = _channel(cur)
            if channel.id not in out.channels:
                out.channels[channel.id] = channel
                out.counts.setdefault(channel.id, 0)
                if wanted is not None and wanted(channel, out.schemas.get(channel.schema_id)):
                    keep.add(channel.id)
        elif opcode == OP_METADATA and not in_summary:
            name = cur.str()
            out.metadata.append((name, cur.map()))
            out.metadata_index.append(
                record(OP_METADATA_INDEX, struct.pack("<QQ", pos, end - pos) + _s(name))
            )
        elif opcode == OP_MESSAGE_INDEX and attach is not None:
            attach.index_offsets[cur.u16()] = pos
            attach.index_length += end - pos
        elif opcode == OP_CHUNK:
            before = len(out.chunks)
            _read_chunk(mm, pos, cur, out, sink, keep, wanted, strict)
            attach = out.chunks[-1] if len(out.chunks) > before else None
        elif opcode == OP_MESSAGE and not in_summary:
            _one_message(mm, body, end, out, sink, keep)
        if opcode not in (OP_CHUNK, OP_MESSAGE_INDEX):
            attach = None
        pos = end
        if not in_summary:
            out.valid_end = pos


def _one_message(
    buf, start: int, end: int, out: FileContents, sink: MessageSink | None, keep: set[int]
) -> None:
    cid, _seq, log_time, pub = struct.unpack_from("<HIQQ", buf, start)
    out.counts[cid] = out.counts.get(cid, 0) + 1
    out.start_time = log_time if out.message_count == 1 else min(out.start_time, log_time)
    out.end_time = max(out.end_time, log_time)
    if sink is not None and cid in keep:
        sink(cid, log_time, pub, memoryview(buf)[start + 22 : end])


def _decompress(compression: str, data: bytes, size: int) -> bytes:
    if compression == "":
        return data
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.decompress(data)
    raise ValueError(f"unsupported chunk compression {compression!r}")


def _read_chunk(
    mm: mmap.mmap,
    offset: int,
    cur: _Cursor,
    out: FileContents,
    sink: MessageSink | None,
    keep: set[int],
    wanted: Wanted | None,
    strict: bool,
) -> None:
    index = len(out.chunks)
    try:
        start, end, usize, crc = cur.u64(), cur.u64(), cur.u64(), cur.u32()
        compression = cur.str()
        csize = cur.u64()
        data = _decompress(compression, cur.raw(csize), usize)
        if len(data) != usize:
            raise ValueError(f"{len(data)} bytes after decompression, header says {usize}")
        if crc and zlib.crc32(data) != crc:
            raise ValueError(f"CRC mismatch (stored {crc:#010x}, computed {zlib.crc32(data):#010x})")
        counts = _chunk_records(data, out, sink, keep, wanted)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        if strict:
            raise CorruptChunkError(out.path.name, index, offset, str(exc)) from None
        out.problems.append(f"{out.path.name}: chunk #{index} at byte {offset} skipped: {exc}")
        return
    out.chunks.append(
        ChunkInfo(start, end, offset, cur.end - offset, {}, 0, compression, csize, usize, counts)
    )
    if len(out.chunks) == 1 or start < out.start_time:
        out.start_time = start
    out.end_time = max(out.end_time, end)


def _chunk_records(
    data: bytes, out: FileContents, sink: MessageSink | None, keep: set[int], wanted: Wanted | None
) -> dict[int, int]:
    counts: dict[int, int] = {}
    found: list[tuple[int, int, int, memoryview]] = []
    view = memoryview(data)
    pos, size = 0, len(data)
    unpack_rec, unpack_msg = _REC.unpack_from, struct.Struct("<HIQQ").unpack_from
    while pos < size:
        opcode, length = unpack_rec(data, pos)
        body, end = pos + 9, pos + 9 + length
        if end > size:
            raise ValueError(f"record at chunk byte {pos} (opcode {opcode:#x}) overruns the chunk")
        if opcode == OP_MESSAGE:
            cid, _seq, log_time, pub = unpack_msg(data, body)
            counts[cid] = counts.get(cid, 0) + 1
            if cid in keep:
                found.append((cid, log_time, pub, view[body + 22 : end]))
        elif opcode == OP_SCHEMA:
            schema = _schema(_Cursor(data, body, end))
            out.schemas.setdefault(schema.id, schema)
        elif opcode == OP_CHANNEL:
            channel = _channel(_Cursor(data, body, end))
            if channel.id not in out.channels:
                out.channels[channel.id] = channel
                if wanted is not None and wanted(channel, out.schemas.get(channel.schema_id)):
                    keep.add(channel.id)
        pos = end
    if sink is not None:  # only once the whole chunk parsed: a damaged chunk delivers nothing
        for item in found:
            sink(*item)
    for cid, n in counts.items():
        out.counts[cid] = out.counts.get(cid, 0) + n
    return counts
