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

from asap_logger.errors import BagError, CorruptChunkError, CorruptRecordError, TruncatedFileError

MAGIC = b"\x89MCAP0\r\n"
OP_HEADER, OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
OP_MESSAGE_INDEX, OP_CHUNK_INDEX, OP_STATISTICS, OP_METADATA = 0x07, 0x08, 0x0B, 0x0C
OP_METADATA_INDEX, OP_SUMMARY_OFFSET, OP_DATA_END = 0x0D, 0x0E, 0x0F
_MSG = struct.Struct("<BQHIQQ")  # opcode, record length, channel, sequence, log time, publish time
_REC = struct.Struct("<BQ")
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
COMPRESSIONS = ("", "zstd", "lz4")
MAX_CHUNK_BYTES = 256 << 20
"""Largest uncompressed chunk the scanner accepts (the recorder writes 4 MiB chunks by default): a chunk
that claims more is refused before anything is allocated for it."""


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
    dropped: list[tuple[int, int, str]] = field(default_factory=list)
    """Byte ranges of the data section that could not be read (start, end, why): damage, a cut-off end."""
    loose: list[tuple[int, int]] = field(default_factory=list)
    """(start, end) of message records outside any chunk (other writers may write them)."""
    library: str = ""
    """The writer named in the Header record."""

    @property
    def message_count(self) -> int:
        """Messages in complete chunks."""
        return sum(self.counts.values())


# --- writer --------------------------------------------------------------------------------------
def _compressor(name: str) -> Callable[[bytes], bytes]:
    if name == "":
        return bytes
    if name == "zstd":
        import zstandard  # optional codec: needed only by who records or reads zstd chunks

        return zstandard.ZstdCompressor(level=1).compress
    if name == "lz4":
        import lz4.frame  # optional codec, as zstandard

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
        self._write_chunk(raw, self._compress(raw), self._compression, self._index,
                          (self._chunk_start, self._chunk_end))
        self._reset_chunk()

    def copy_chunk(self, chunk: ChunkRecord, raw: bytes) -> None:
        """Write a chunk read from another file as it is (its ``records()`` are ``raw``), with new indexes."""
        self.flush_chunk()
        self._write_chunk(raw, chunk.body, chunk.compression, message_index(raw),
                          (chunk.start_time, chunk.end_time))

    def _write_chunk(self, raw: bytes, body: bytes, compression: str, index: dict[int, array],
                     span: tuple[int, int]) -> None:
        head = struct.pack("<QQQI", *span, len(raw), zlib.crc32(raw))
        chunk = record(OP_CHUNK, head + _s(compression) + _U64.pack(len(body)) + body)
        offset = self._file.tell()
        pos = offset + len(chunk)
        indexes, index_offsets, counts = [], {}, {}
        for cid, entries in index.items():
            rec = record(OP_MESSAGE_INDEX, _U16.pack(cid) + _U32.pack(len(entries) * 8) + entries.tobytes())
            index_offsets[cid], counts[cid] = pos, len(entries) // 2
            pos += len(rec)
            indexes.append(rec)
        info = ChunkInfo(
            *span, offset, len(chunk), index_offsets, pos - offset - len(chunk), compression, len(body),
            len(raw), counts,
        )
        self._write(chunk + b"".join(indexes))
        if self._fsync:
            os.fsync(self._file.fileno())
        self._account(info)

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

    def text(self) -> str:
        return self.raw(self.u32()).decode()  # UnicodeDecodeError is a ValueError

    def map(self) -> dict[str, str]:
        end = self.u32() + self.pos
        if end > self.end:
            raise ValueError(f"map of {end - self.pos} bytes overruns its record")
        out = {}
        while self.pos < end:
            key = self.text()
            out[key] = self.text()
        return out

    def done(self) -> None:
        """The record held exactly its fields (a length field that lies shows up here)."""
        if self.pos != self.end:
            raise ValueError(f"{self.end - self.pos} bytes left over after the record's fields")


def _schema(cur: _Cursor) -> Schema:
    sid, name, enc = cur.u16(), cur.text(), cur.text()
    schema = Schema(sid, name, enc, cur.raw(cur.u32()))
    cur.done()
    return schema


def _channel(cur: _Cursor) -> Channel:
    cid, sid = cur.u16(), cur.u16()
    channel = Channel(cid, sid, cur.text(), cur.text(), cur.map())
    cur.done()
    return channel


def _decompress(compression: str, data: bytes, size: int) -> bytes:
    """Decompress at most ``size + 1`` bytes: a chunk that claims less than it holds stops there."""
    if compression == "":
        return data
    try:
        if compression == "zstd":
            import zstandard  # optional codecs, as in _compressor

            with zstandard.ZstdDecompressor().stream_reader(data) as reader:
                return reader.read(size + 1)
        import lz4.frame  # (optional codec)

        return lz4.frame.LZ4FrameDecompressor().decompress(data, max_length=size + 1)
    except Exception as exc:  # zstandard.ZstdError, lz4's RuntimeError: not a valid stream
        raise ValueError(f"{compression} data does not decompress: {exc}") from None


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk record read by its own fields (its record length is not trusted)."""

    start_time: int
    end_time: int
    uncompressed_size: int
    crc: int
    compression: str
    body: bytes
    end: int
    """File offset just after the record, from the chunk's own sizes."""

    def records(self) -> bytes:
        """The decompressed records, checked against the stored size and CRC (ValueError otherwise)."""
        data = _decompress(self.compression, self.body, self.uncompressed_size)
        if len(data) != self.uncompressed_size:
            more = "more than " if len(data) > self.uncompressed_size else ""
            raise ValueError(
                f"{more}{len(data)} bytes after decompression, header says {self.uncompressed_size}"
            )
        if self.crc and zlib.crc32(data) != self.crc:
            raise ValueError(f"CRC mismatch (stored {self.crc:#010x}, computed {zlib.crc32(data):#010x})")
        return data


def read_chunk(buf: bytes | mmap.mmap, offset: int, size: int) -> ChunkRecord:
    """The chunk record at ``offset`` of a buffer of ``size`` bytes; ValueError if it cannot be one."""
    cur = _Cursor(buf, offset + 9, size)
    start, end, usize, crc = cur.u64(), cur.u64(), cur.u64(), cur.u32()
    name_len = cur.u32()
    if name_len > 4:
        raise ValueError(f"compression name of {name_len} bytes")
    compression = cur.raw(name_len).decode()
    if compression not in COMPRESSIONS:
        raise ValueError(f"unsupported chunk compression {compression!r}")
    if usize > MAX_CHUNK_BYTES:
        raise ValueError(f"claims {usize} bytes uncompressed, over the reader's limit of {MAX_CHUNK_BYTES} "
                         "(asap_logger.mcap_io.MAX_CHUNK_BYTES)")
    body = cur.raw(cur.u64())
    return ChunkRecord(start, end, usize, crc, compression, body, cur.pos)


@dataclass
class Summary:
    """What the summary section of a closed file says: where to resume past damage, what it held."""

    data_end: int
    """Offset of the DataEnd record (the end of the data section)."""
    chunks: dict[int, int] = field(default_factory=dict)
    """Chunk offset -> record length, from the chunk indexes."""
    metadata: list[int] = field(default_factory=list)
    """Offsets of the metadata records."""
    channel_counts: dict[int, int] = field(default_factory=dict)
    """Messages per channel, from the statistics record."""
    crc_ok: bool = True

    @property
    def resume_points(self) -> list[int]:
        """Offsets where a record is known to start."""
        return sorted([*self.chunks, *self.metadata, self.data_end])


def read_summary(buf: bytes | mmap.mmap, size: int) -> Summary | None:
    """The summary of a file that has an intact footer; None if it has none or it does not parse."""
    footer = size - len(MAGIC) - 9 - 20
    if footer < len(MAGIC) or buf[size - len(MAGIC) : size] != MAGIC:
        return None
    opcode, length = _REC.unpack_from(buf, footer)
    start, _offsets, crc = struct.unpack_from("<QQI", buf, footer + 9)
    data_end = start - 13  # DataEnd: opcode, length, u32 CRC
    if opcode != OP_FOOTER or length != 20 or not len(MAGIC) < data_end < footer:
        return None
    out = Summary(data_end, crc_ok=not crc or zlib.crc32(buf[start : footer + 9 + 16]) == crc)
    pos = start
    try:
        while pos < footer:
            opcode, length = _REC.unpack_from(buf, pos)
            cur = _Cursor(buf, pos + 9, min(pos + 9 + length, footer))
            if opcode == OP_CHUNK_INDEX:
                cur.take(16)
                offset, chunk_length = cur.u64(), cur.u64()
                out.chunks[offset] = chunk_length
            elif opcode == OP_METADATA_INDEX:
                out.metadata.append(cur.u64())
            elif opcode == OP_STATISTICS:
                cur.take(8 + 2 + 4 * 4 + 16)
                end = cur.u32() + cur.pos
                while cur.pos < end:
                    cid = cur.u16()
                    out.channel_counts[cid] = cur.u64()
            pos += 9 + length
    except (ValueError, struct.error):
        return None
    return out


Wanted = Callable[[Channel, Schema | None], bool]
"""Called once per channel (with its schema) when the scanner meets it: keep its messages?"""
MessageSink = Callable[[int, int, int, memoryview], None]
"""Called with (channel id, log time, publish time, data) for each message of a wanted channel."""


def scan(
    path: Path, *, sink: MessageSink | None = None, wanted: Wanted | None = None, strict: bool = True
) -> FileContents:
    """Read an .mcap file in one pass, tolerating a cut-off end.

    Messages of channels for which ``wanted`` holds go to ``sink``. Damage (a chunk failing its CRC, a
    record that does not parse, a length running past the end with readable records after it) raises
    ``CorruptRecordError`` / ``CorruptChunkError`` naming the file and byte offset when ``strict``;
    otherwise the damaged bytes are skipped up to the next record that checks out (a chunk whose CRC
    matches, or a record the summary indexes), listed in ``problems`` and ``dropped``. A chunk whose
    length field lies is read by its own sizes when its CRC proves it whole. A file that ends inside a
    record with nothing readable after it was cut off (a crash): read up to there, ``complete`` False.
    """
    out = FileContents(path)
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < len(MAGIC):
                raise TruncatedFileError(f"{path}: {size} bytes, not an MCAP file")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                if mm[:8] != MAGIC:
                    raise CorruptChunkError(str(path), -1, 0, "no MCAP magic at the start")
                _Scanner(mm, size, out, sink, wanted, strict).run()
    except OSError as exc:
        raise BagError(f"{path}: cannot read: {exc}") from None
    if not out.complete and not strict:
        out.problems.append(f"{path.name}: no footer; data after byte {out.valid_end} was cut off")
        if out.valid_end < size and not (out.dropped and out.dropped[-1][1] == size):
            out.dropped.append((out.valid_end, size, "cut off"))
    return out


class _Scanner:
    """One pass over the records of a mapped file (see :func:`scan`)."""

    def __init__(self, mm: mmap.mmap, size: int, out: FileContents, sink: MessageSink | None,
                 wanted: Wanted | None, strict: bool) -> None:
        self.mm, self.size, self.out = mm, size, out
        self.sink, self.wanted, self.strict = sink, wanted, strict
        self.keep: set[int] = set()
        self.chunks_seen = 0
        self._summary: Summary | None = None
        self._summary_read = False  # read when first asked (only damage needs it)

    def summary(self) -> Summary | None:
        if not self._summary_read:
            self._summary, self._summary_read = read_summary(self.mm, self.size), True
        return self._summary

    def run(self) -> None:
        mm, size, out = self.mm, self.size, self.out
        pos, in_summary = 8, False
        attach: ChunkInfo | None = None  # the chunk whose MessageIndex records follow
        out.valid_end = pos
        while pos + 9 <= size:
            opcode, length = _REC.unpack_from(mm, pos)
            end = pos + 9 + length
            try:
                if opcode == OP_CHUNK:  # read by its own sizes: its length field may lie
                    chunks = len(out.chunks)
                    end = self._chunk(pos, end)
                    attach = out.chunks[-1] if len(out.chunks) > chunks else None
                elif end > size:
                    raise ValueError(f"a record (opcode {opcode:#04x}) of {length} bytes runs past the end "
                                     f"of the file ({size} bytes)")
                elif opcode == OP_FOOTER:
                    out.complete = mm[end : end + 8] == MAGIC
                    return
                else:
                    attach = self._record(opcode, pos, end, in_summary, attach)
                    in_summary = in_summary or opcode == OP_DATA_END
            except (ValueError, struct.error) as exc:
                if in_summary:  # the data section was read whole; reindex rebuilds the summary
                    out.problems.append(f"{out.path.name}: summary damaged at byte {pos} ({exc})")
                    return
                resume = self._damaged(pos, str(exc), cut=end > size)
                if resume is None:
                    return
                pos, attach = resume, None
                continue
            pos = end
            if not in_summary:
                out.valid_end = pos

    def _record(self, opcode: int, pos: int, end: int, in_summary: bool,
                attach: ChunkInfo | None) -> ChunkInfo | None:
        """Handle a record other than a chunk or the footer; returns the chunk MessageIndexes attach to."""
        out, cur = self.out, _Cursor(self.mm, pos + 9, end)
        if opcode == OP_HEADER:
            cur.text()
            out.library = cur.text()
            cur.done()
        elif opcode == OP_SCHEMA:
            schema = _schema(cur)
            out.schemas.setdefault(schema.id, schema)
        elif opcode == OP_CHANNEL:
            channel = _channel(cur)
            if channel.id not in out.channels:  # (from the summary: one whose record was damaged)
                self._add_channel(channel)
        elif opcode == OP_METADATA and not in_summary:
            name, entries = cur.text(), cur.map()
            cur.done()
            out.metadata.append((name, entries))
            out.metadata_index.append(
                record(OP_METADATA_INDEX, struct.pack("<QQ", pos, end - pos) + _s(name))
            )
        elif opcode == OP_MESSAGE_INDEX and not in_summary:
            cid, entries_size = cur.u16(), cur.u32()
            cur.take(entries_size)
            cur.done()
            if attach is not None:
                attach.index_offsets[cid] = pos
                attach.index_length += end - pos
            return attach
        elif opcode == OP_MESSAGE and not in_summary:
            self._one_message(pos + 9, end)
            out.loose.append((pos, end))
        return None

    def _add_channel(self, channel: Channel) -> None:
        out = self.out
        out.channels[channel.id] = channel
        out.counts.setdefault(channel.id, 0)
        if self.wanted is not None and self.wanted(channel, out.schemas.get(channel.schema_id)):
            self.keep.add(channel.id)

    def _one_message(self, start: int, end: int) -> None:
        out = self.out
        cid, _seq, log_time, pub = struct.unpack_from("<HIQQ", self.mm, start)
        out.counts[cid] = out.counts.get(cid, 0) + 1
        out.start_time = log_time if out.message_count == 1 else min(out.start_time, log_time)
        out.end_time = max(out.end_time, log_time)
        if self.sink is not None and cid in self.keep:
            self.sink(cid, log_time, pub, memoryview(self.mm)[start + 22 : end])

    def _chunk(self, pos: int, end: int) -> int:
        """Read the chunk at ``pos``; returns where the next record starts."""
        out, index = self.out, self.chunks_seen
        self.chunks_seen += 1
        chunk = read_chunk(self.mm, pos, self.size)  # ValueError: no chunk structure here
        try:
            data = chunk.records()
            if chunk.end != end and not chunk.crc:
                raise ValueError("its length field disagrees with its sizes and it has no CRC to settle it")
            counts = _chunk_records(data, out, self.sink, self.keep, self._add_channel)
        except (ValueError, struct.error) as exc:
            if chunk.end != end:
                raise  # neither the length field nor the content holds: damage, resynchronize
            if self.strict:
                raise CorruptChunkError(out.path.name, index, pos, str(exc)) from None
            out.problems.append(f"{out.path.name}: chunk #{index} at byte {pos} skipped: {exc}")
            out.dropped.append((pos, end, f"chunk #{index}: {exc}"))
            return end
        if chunk.end != end:
            out.problems.append(f"{out.path.name}: chunk #{index} at byte {pos}: its length field says "
                                f"{end - pos - 9} bytes, its sizes and CRC {chunk.end - pos - 9}: read whole")
        out.chunks.append(ChunkInfo(chunk.start_time, chunk.end_time, pos, chunk.end - pos, {}, 0,
                                    chunk.compression, len(chunk.body), chunk.uncompressed_size, counts))
        if len(out.chunks) == 1 or chunk.start_time < out.start_time:
            out.start_time = chunk.start_time
        out.end_time = max(out.end_time, chunk.end_time)
        return chunk.end

    def _damaged(self, pos: int, detail: str, cut: bool) -> int | None:
        """Where reading resumes past damage at ``pos``; None if the file was cut off there (``cut``:
        the record runs past the end) or nothing after it is readable."""
        resume = self._resync(pos)
        summary = self.summary()
        if resume is None and summary is not None and summary.data_end > pos:
            resume = summary.data_end
        if resume is None and cut:
            return None  # a record running past the end, nothing readable after it: a crash's cut
        if self.strict:
            where = f"readable records resume at byte {resume}" if resume else "nothing readable follows"
            raise CorruptRecordError(self.out.path.name, pos, f"{detail}; {where}")
        end = self.size if resume is None else resume
        self.out.problems.append(f"{self.out.path.name}: bytes {pos}..{end} unreadable, skipped: {detail}")
        self.out.dropped.append((pos, end, detail))
        return resume

    def _resync(self, pos: int) -> int | None:
        """The next offset after ``pos`` where a chunk proves itself (CRC) or the summary says a record is."""
        summary = self.summary()
        known = [o for o in summary.resume_points if o > pos] if summary else []
        limit = known[0] if known else self.size
        at = pos
        while (at := self.mm.find(b"\x06", at + 1, limit)) != -1:
            try:
                chunk = read_chunk(self.mm, at, self.size)
                if chunk.crc and chunk.start_time <= chunk.end_time:
                    chunk.records()
                    return at
            except ValueError:
                continue
        return limit if known else None


def message_index(data: bytes) -> dict[int, array]:
    """Per channel, (log time, offset) pairs of the messages in a chunk's records (MessageIndex entries)."""
    index: dict[int, array] = {}
    pos, size = 0, len(data)
    while pos < size:
        opcode, length = _REC.unpack_from(data, pos)
        if opcode == OP_MESSAGE:
            cid, _seq, log_time = struct.unpack_from("<HIQ", data, pos + 9)
            index.setdefault(cid, array("Q")).extend((log_time, pos))
        pos += 9 + length
    return index


def _chunk_records(
    data: bytes, out: FileContents, sink: MessageSink | None, keep: set[int],
    add_channel: Callable[[Channel], None],
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
            if length < 22:
                raise ValueError(f"message record at chunk byte {pos} is {length} bytes, under its header")
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
                add_channel(channel)
        pos = end
    if sink is not None:  # only once the whole chunk parsed: a damaged chunk delivers nothing
        for item in found:
            sink(*item)
    for cid, n in counts.items():
        out.counts[cid] = out.counts.get(cid, 0) + n
    return counts
