"""Vectorized CDR decoding: one message's layout, applied to every message of a topic at once.

A layout walk of the first message gives every leaf field's byte offset and the position and
value of every length prefix (strings, sequences). Messages whose bytes have the same length and
the same value at each of those prefixes share the layout (offsets depend only on earlier
lengths), so a field of N messages is a strided view of an (N, size) byte matrix: no per-message
Python. Messages that differ are grouped by their own layouts. Offsets follow XCDR1 (what ROS 2
RMWs put on the wire and rosbag2 stores): primitives aligned to their size, relative to the byte
after the 4-byte encapsulation header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from asap_logger.errors import DecodeError

_PRIMITIVES = {
    "bool": "u1",
    "byte": "u1",
    "char": "u1",
    "int8": "i1",
    "uint8": "u1",
    "int16": "<i2",
    "uint16": "<u2",
    "int32": "<i4",
    "uint32": "<u4",
    "int64": "<i8",
    "uint64": "<u8",
    "float32": "<f4",
    "float64": "<f8",
}
_BASE, _NAME, _ARRAY, _SEQUENCE = 1, 2, 3, 4  # rosbags Nodetype values
_U32 = struct.Struct("<I")
FieldDefs = dict  # rosbags Typestore.fielddefs: msgtype -> (constants, [(name, (nodetype, detail))])


@dataclass
class Layout:
    """Where each leaf field of one message lies."""

    size: int
    leaves: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Field path (array indices dropped, e.g. ``motor_state.q``) -> [(offset, element count)]."""
    dtypes: dict[str, str] = field(default_factory=dict)
    """Field path -> numpy dtype; ``"str"`` for strings."""
    prefixes: list[tuple[int, int]] = field(default_factory=list)
    """(offset, value) of every u32 length prefix."""

    @property
    def key(self) -> tuple:
        """Equal keys <=> equal layouts."""
        return self.size, tuple(self.prefixes)


class _Walker:
    def __init__(self, defs: FieldDefs, data: bytes | memoryview) -> None:
        self.defs, self.data, self.pos = defs, data, 4
        self.layout = Layout(size=len(data))

    def _align(self, n: int) -> None:
        self.pos += -(self.pos - 4) % n

    def _leaf(self, path: str, dtype: str, offset: int, count: int) -> None:
        self.layout.leaves.setdefault(path, []).append((offset, count))
        self.layout.dtypes[path] = dtype

    def _length(self) -> int:
        self._align(4)
        if self.pos + 4 > len(self.data):
            raise ValueError(f"length prefix at byte {self.pos} is past the end ({len(self.data)} bytes)")
        value = _U32.unpack_from(self.data, self.pos)[0]
        self.layout.prefixes.append((self.pos, value))
        self.pos += 4
        return value

    def message(self, msgtype: str, prefix: str) -> None:
        for name, (kind, detail) in self.defs[msgtype][1]:
            path = prefix + name
            if kind == _BASE:
                self._many(path, detail[0], 1)
            elif kind == _NAME:
                self.message(detail, path + ".")
            else:
                (sub_kind, sub_detail), count = detail
                if kind == _SEQUENCE:
                    count = self._length()
                if sub_kind == _BASE:
                    self._many(path, sub_detail[0], count)
                else:
                    for _ in range(count):
                        self.message(sub_detail, path + ".")

    def _many(self, path: str, typ: str, count: int) -> None:
        if typ in ("string", "wstring"):
            for _ in range(count):
                n = self._length()
                self._leaf(path, "str", self.pos, max(n - 1, 0))
                self.pos += n
            return
        dtype = _PRIMITIVES.get(typ)
        if dtype is None:
            raise ValueError(f"unsupported primitive {typ!r} in {path}")
        size = np.dtype(dtype).itemsize
        if count:
            self._align(size)
        self._leaf(path, dtype, self.pos, count)
        self.pos += size * count
        if self.pos > len(self.data):
            raise ValueError(f"field {path} ends at byte {self.pos}, past the end ({len(self.data)} bytes)")


def plan(defs: FieldDefs, msgtype: str, data: bytes | memoryview) -> Layout:
    """The layout of one CDR message (raises ValueError if the bytes are too short)."""
    walker = _Walker(defs, data)
    walker.message(msgtype, "")
    return walker.layout


def _column(rows: np.ndarray, spots: list[tuple[int, int]], dtype: str) -> np.ndarray:
    """Gather ``spots`` (offset, count) of every row as one (N, total count) array of ``dtype``."""
    size = np.dtype(dtype).itemsize
    index = np.concatenate([np.arange(o, o + size * c) for o, c in spots]) if spots else np.zeros(0, int)
    return np.ascontiguousarray(rows[:, index]).view(dtype)


def _strings(rows: np.ndarray, spots: list[tuple[int, int]]) -> np.ndarray:
    out = np.empty((rows.shape[0], len(spots)), dtype=object)
    for j, (o, c) in enumerate(spots):
        for i, raw in enumerate(rows[:, o : o + c]):
            out[i, j] = raw.tobytes().decode(errors="replace")
    return out


def _extract(layout: Layout, rows: np.ndarray, fields: list[str], topic: str) -> dict[str, np.ndarray]:
    out = {}
    for name in fields:
        if name not in layout.leaves:
            raise DecodeError(topic, 0, f"no field {name!r}; fields are {sorted(layout.leaves)}")
        spots, dtype = layout.leaves[name], layout.dtypes[name]
        out[name] = _strings(rows, spots) if dtype == "str" else _column(rows, spots, dtype)
    return out


def decode(
    defs: FieldDefs,
    msgtype: str,
    blobs: list,
    fields: list[str],
    topic: str = "",
    *,
    empty_fill: float | None = None,
) -> dict[str, np.ndarray]:
    """Decode ``fields`` of every message in ``blobs``: {field path: (N, count) array}.

    A scalar field gives an (N, 1) array, a fixed array or repeated nested field (N, count).
    Raises ``DecodeError`` naming the topic and message when bytes do not fit the schema or a
    field's length varies between messages, unless it varies only by being empty in some and
    ``empty_fill`` is given: those rows are then filled with it.
    """
    if not blobs:
        raise DecodeError(topic, 0, "no messages")
    groups: dict[tuple, tuple[Layout, list[int]]] = {}
    first = _plan(defs, msgtype, blobs[0], topic, 0)
    if _uniform(first, blobs):
        return _extract(first, _stack(blobs, first.size), fields, topic)
    for i, blob in enumerate(blobs):
        layout = _plan(defs, msgtype, blob, topic, i)
        groups.setdefault(layout.key, (layout, []))[1].append(i)
    parts = [
        (rows, _extract(layout, _stack([blobs[i] for i in rows], layout.size), fields, topic))
        for layout, rows in groups.values()
    ]
    return {name: _merge(name, parts, len(blobs), topic, empty_fill) for name in fields}


def _plan(defs: FieldDefs, msgtype: str, blob, topic: str, index: int) -> Layout:
    try:
        return plan(defs, msgtype, blob)
    except (ValueError, struct.error) as exc:
        raise DecodeError(topic, index, str(exc)) from None
    except KeyError as exc:  # a damaged embedded definition names a type it does not define
        raise DecodeError(topic, index, f"the bag's message definition lacks type {exc}") from None
    except RecursionError:
        raise DecodeError(topic, index, "the bag's message definition nests itself") from None


def _stack(blobs: list, size: int) -> np.ndarray:
    return np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), size)


def _uniform(layout: Layout, blobs: list) -> bool:
    if any(len(b) != layout.size for b in blobs):
        return False
    rows = _stack(blobs, layout.size)
    return all(bool((_column(rows, [(o, 1)], "<u4")[:, 0] == v).all()) for o, v in layout.prefixes)


def _merge(name: str, parts: list, n: int, topic: str, empty_fill: float | None) -> np.ndarray:
    widths = {p[name].shape[1] for _, p in parts}
    if empty_fill is not None and len(widths) == 2 and 0 in widths:
        widths.discard(0)
    if len(widths) > 1:
        raise DecodeError(
            topic, parts[1][0][0], f"field {name!r} changes length between messages: {sorted(widths)}"
        )
    sample = next(p[name] for _, p in parts if p[name].shape[1] in widths)
    out = np.empty((n, sample.shape[1]), dtype=sample.dtype)
    for rows, values in parts:
        out[rows] = values[name] if values[name].shape[1] or empty_fill is None else empty_fill
    return out
