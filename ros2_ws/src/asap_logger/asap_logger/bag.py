"""A rosbag2 bag directory (MCAP storage) written from raw CDR bytes: files, splitting, metadata.yaml.

Layout, as ``ros2 bag record -s mcap`` makes it::

    <bag>/metadata.yaml        rosbag2 bag metadata, version 9
    <bag>/<bag>_0.mcap         profile "ros2": schemas "ros2msg", channels "cdr" with
    <bag>/<bag>_1.mcap ...     offered_qos_profiles + topic_type_hash, a "rosbag2" metadata record

``metadata.yaml`` is (re)written atomically whenever a file is closed, so after a crash it lists
every closed file; ``asap-bag reindex`` rebuilds it from the files themselves.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from asap_logger import mcap_io
from asap_logger.errors import BagNotFoundError
from asap_logger.msgdefs import MessageDefinition

METADATA_VERSION = 9
ROS_DISTRO = "kilted"
LIBRARY = "asap_logger 0.1.0 (rosbag2-compatible MCAP)"


@dataclass(frozen=True, kw_only=True)
class BagCfg:
    """How a bag is cut into chunks and files."""

    chunk_bytes: int = 4 << 20
    """Close a chunk when it holds this many bytes (bytes)."""
    chunk_period_s: float = 0.5
    """Close a chunk at most this long after its first message (s): bounds what a crash loses."""
    max_file_bytes: int = 0
    """Start a new .mcap file past this size (bytes); 0 = no size split."""
    max_file_duration_s: float = 0.0
    """Start a new .mcap file past this span of log time (s); 0 = no duration split."""
    compression: str = ""
    """Chunk compression: "" (none, rosbag2's default), "zstd" or "lz4"."""
    fsync: bool = True
    """fsync after every chunk (survives power loss, not just a killed process)."""


@dataclass(frozen=True)
class TopicInfo:
    """A recorded topic: name, type definition and the QoS its publishers offered."""

    name: str
    definition: MessageDefinition
    qos_profiles: tuple[dict, ...] = ()
    """rosbag2 v9 QoS dicts (history, depth, reliability, durability, ...)."""


@dataclass
class FileStats:
    """One closed (or recovered) .mcap file of a bag."""

    path: str
    start_time: int
    end_time: int
    message_count: int


@dataclass
class TopicStats:
    """Per-topic line of metadata.yaml."""

    name: str
    msgtype: str
    qos_profiles: list = field(default_factory=list)
    type_hash: str = ""
    message_count: int = 0


def _duration(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def qos_profile(
    *,
    reliability: str = "reliable",
    durability: str = "volatile",
    history: str = "keep_last",
    depth: int = 10,
    deadline_ns: int = 0,
    lifespan_ns: int = 0,
    liveliness: str = "automatic",
    liveliness_lease_ns: int = 0,
) -> dict:
    """One offered QoS profile in rosbag2's v9 form (enum names lower case, durations sec/nsec)."""
    return {
        "history": history,
        "depth": depth,
        "reliability": reliability,
        "durability": durability,
        "deadline": _duration(deadline_ns),
        "lifespan": _duration(lifespan_ns),
        "liveliness": liveliness,
        "liveliness_lease_duration": _duration(liveliness_lease_ns),
        "avoid_ros_namespace_conventions": False,
    }


def qos_yaml(profiles: list | tuple) -> str:
    """QoS profiles as rosbag2 stores them in MCAP channel metadata (v9: a YAML list)."""
    return (
        yaml.safe_dump(list(profiles), default_flow_style=False, sort_keys=False).strip() if profiles else ""
    )


def metadata_document(files: list[FileStats], topics: list[TopicStats], custom_data: dict[str, str]) -> dict:
    """The rosbag2 ``metadata.yaml`` document (version 9, MCAP storage)."""
    spans = [f for f in files if f.message_count]
    start = min((f.start_time for f in spans), default=0)
    end = max((f.end_time for f in spans), default=0)
    return {
        "rosbag2_bagfile_information": {
            "version": METADATA_VERSION,
            "storage_identifier": "mcap",
            "duration": {"nanoseconds": max(0, end - start)},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": sum(f.message_count for f in files),
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": t.name,
                        "type": t.msgtype,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": list(t.qos_profiles),
                        "type_description_hash": t.type_hash,
                    },
                    "message_count": t.message_count,
                }
                for t in topics
            ],
            "compression_format": "",
            "compression_mode": "",
            "relative_file_paths": [f.path for f in files],
            "files": [
                {
                    "path": f.path,
                    "starting_time": {"nanoseconds_since_epoch": f.start_time},
                    "duration": {"nanoseconds": max(0, f.end_time - f.start_time)},
                    "message_count": f.message_count,
                }
                for f in files
            ],
            "custom_data": dict(custom_data),
            "ros_distro": ROS_DISTRO,
        }
    }


_INDEX = re.compile(r"_(\d+)\.mcap$")


def bag_files(path: Path, bag_metadata: dict | None) -> list[Path]:
    """The .mcap files of a bag: those metadata.yaml lists, then any others by split index."""
    names = (bag_metadata or {}).get("relative_file_paths", [])
    # metadata.yaml is data, not trusted: only plain file names of this directory
    listed = [path / p for p in names if isinstance(p, str) and p.endswith(".mcap") and Path(p).name == p] \
        if isinstance(names, list) else []
    found = sorted(
        path.glob("*.mcap"), key=lambda p: (int(m.group(1)) if (m := _INDEX.search(p.name)) else -1, p.name)
    )
    files = [p for p in listed if p.exists()] + [p for p in found if p not in listed]
    if not files:
        raise BagNotFoundError(f"{path}: no .mcap files (is it an episode bag directory?)")
    return files


def fsync_dir(path: Path) -> None:
    """Make renames and new files in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by ``text``: after a crash it holds the old or the new text, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    fsync_dir(path.parent)


def write_metadata(bag: Path, document: dict) -> None:
    """Write ``metadata.yaml`` atomically."""
    write_atomic(bag / "metadata.yaml", yaml.safe_dump(document, default_flow_style=False, sort_keys=False))


def topic_counts(scans: list[mcap_io.FileContents]) -> dict[str, int]:
    """Topic -> messages in the scanned files (those of chunks that read whole)."""
    counts: dict[str, int] = {}
    for contents in scans:
        for cid, channel in contents.channels.items():
            counts[channel.topic] = counts.get(channel.topic, 0) + contents.counts.get(cid, 0)
    return counts


class BagWriter:
    """Writes raw CDR messages into a new rosbag2 MCAP bag directory.

    Not thread-safe: one thread (the recorder's writer thread) owns it. Every ``OSError`` is
    re-raised to the caller untouched after the bag is left in a readable state.
    """

    def __init__(self, path: Path, cfg: BagCfg, *, custom_data: dict[str, str] | None = None) -> None:
        self.path = path
        self.cfg = cfg
        self.custom_data = dict(custom_data or {})
        path.mkdir(parents=False, exist_ok=False)
        self._topics: list[TopicInfo] = []
        self._schema_ids: dict[str, int] = {}
        self._sequence: list[int] = []
        self.files: list[FileStats] = []
        self.topic_counts: list[int] = []
        self._file: mcap_io.McapFileWriter | None = None
        self._chunk_opened = 0.0
        self._file_start: int | None = None
        self._open_file()

    # -- topics and files -------------------------------------------------------------------------
    def add_topic(self, topic: TopicInfo) -> int:
        """Register a topic; returns its channel id (stable across split files)."""
        self._topics.append(topic)
        self._sequence.append(0)
        self.topic_counts.append(0)
        self._register(len(self._topics) - 1)
        return len(self._topics)

    def _register(self, index: int) -> None:
        topic, writer = self._topics[index], self._file
        assert writer is not None
        msgtype = topic.definition.msgtype
        if msgtype not in self._schema_ids:
            self._schema_ids[msgtype] = len(self._schema_ids) + 1
        sid = self._schema_ids[msgtype]
        if sid not in self._file_schemas:
            writer.add_schema(
                mcap_io.Schema(sid, msgtype, topic.definition.encoding, topic.definition.text.encode())
            )
            self._file_schemas.add(sid)
        meta = {
            "offered_qos_profiles": qos_yaml(topic.qos_profiles),
            "topic_type_hash": topic.definition.type_hash,
        }
        writer.add_channel(mcap_io.Channel(index + 1, sid, topic.name, "cdr", meta))

    def _open_file(self) -> None:
        name = f"{self.path.name}_{len(self.files)}.mcap"
        self._file = mcap_io.McapFileWriter(
            self.path / name,
            library=LIBRARY,
            chunk_bytes=self.cfg.chunk_bytes,
            compression=self.cfg.compression,
            fsync=self.cfg.fsync,
        )
        self._file_schemas: set[int] = set()
        if self.custom_data:
            self._file.add_metadata("asap_episode", self.custom_data)
        for index in range(len(self._topics)):
            self._register(index)

    def _close_file(self) -> None:
        writer, self._file = self._file, None
        assert writer is not None
        writer.flush_chunk()
        files = [
            *self.files,
            FileStats(writer.path.name, writer.start_time, writer.end_time, sum(writer.counts.values())),
        ]
        doc = metadata_document(files, self._topic_stats(), self.custom_data)
        writer.add_metadata(
            "rosbag2",
            {
                "serialized_metadata": yaml.safe_dump(doc["rosbag2_bagfile_information"], sort_keys=False),
                "ROS_DISTRO": ROS_DISTRO,
            },
        )
        writer.close()
        self.files = files
        write_metadata(self.path, doc)

    def _topic_stats(self) -> list[TopicStats]:
        return [
            TopicStats(t.name, t.definition.msgtype, list(t.qos_profiles), t.definition.type_hash, n)
            for t, n in zip(self._topics, self.topic_counts, strict=True)
        ]

    # -- data -------------------------------------------------------------------------------------
    def write(self, channel_id: int, log_time: int, publish_time: int, data: bytes | memoryview) -> None:
        """Append one message (CDR bytes, as received) to the open chunk; split files first if due."""
        writer = self._file
        assert writer is not None, "write after close"
        if self._file_start is None:
            self._file_start = log_time
        elif self._split_due(writer, log_time - self._file_start, len(data)):
            self._close_file()
            self._open_file()
            writer, self._file_start = self._file, log_time
            assert writer is not None
        if not writer.pending_bytes:
            self._chunk_opened = time.monotonic()
        index = channel_id - 1
        writer.add_message(channel_id, self._sequence[index], log_time, publish_time, data)
        self._sequence[index] += 1
        self.topic_counts[index] += 1

    def _split_due(self, writer: mcap_io.McapFileWriter, file_age_ns: int, size: int) -> bool:
        cfg = self.cfg
        too_big = cfg.max_file_bytes and writer.size + writer.pending_bytes + size > cfg.max_file_bytes
        too_long = cfg.max_file_duration_s and file_age_ns * 1e-9 >= cfg.max_file_duration_s
        return bool(too_big or too_long)

    def tick(self, now: float | None = None) -> None:
        """Close the open chunk if it is older than ``chunk_period_s`` (call a few times per period)."""
        writer = self._file
        now = time.monotonic() if now is None else now
        if (
            writer is not None
            and writer.pending_bytes
            and now - self._chunk_opened >= self.cfg.chunk_period_s
        ):
            writer.flush_chunk()

    def topic_message_counts(self) -> dict[str, int]:
        """Topic name -> messages written."""
        return {t.name: n for t, n in zip(self._topics, self.topic_counts, strict=True)}

    @property
    def message_count(self) -> int:
        """Messages written so far (including the open chunk)."""
        return sum(self.topic_counts)

    def set_custom_data(self, entries: dict[str, str]) -> None:
        """Add entries to metadata.yaml's ``custom_data`` (written when a file closes)."""
        self.custom_data.update(entries)

    def close(self) -> None:
        """Close the open file and write the final metadata.yaml."""
        if self._file is not None:
            self._close_file()

    def abort(self) -> None:
        """Stop after an I/O error: drop the open chunk, close the descriptor, never raise."""
        if self._file is not None:
            self._file.abort()
            self._file = None
