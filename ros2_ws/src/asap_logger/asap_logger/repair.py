"""Repair a bag: close the files a crash cut off, step over damage, rebuild ``metadata.yaml``.

``reindex`` never edits a recording in place. A file that needs repair (no footer, a damaged chunk or
record, a length field that lies, a damaged summary) is written anew next to it from everything that
reads whole: header, schemas, channels, metadata, every chunk that passes its CRC (copied byte for byte,
message indexes rebuilt), then the summary and footer. The new file is fsynced, read back and checked
before it replaces the old one; when the old one held bytes the new one lacks (a cut-off record, a
damaged chunk, unreadable bytes), it is kept as ``<file>.orig``. Damage is stepped over, not read as
the end of the file: reading resumes at the next chunk whose CRC checks out, or at the next record the
summary indexes. What was lost (bytes, chunks, messages per topic where the summary counted them) is
reported and stored in ``episode.json``, whose counts are set to what the bag now holds.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from asap_logger import mcap_io
from asap_logger.bag import (
    LIBRARY,
    FileStats,
    TopicStats,
    bag_files,
    fsync_dir,
    metadata_document,
    topic_counts,
    write_metadata,
)
from asap_logger.errors import BagError, BagNotFoundError, StorageError
from asap_logger.recorder import write_json


@dataclass
class RepairReport:
    """What ``reindex`` did to a bag."""

    bag: Path
    closed_files: list[str] = field(default_factory=list)
    """Files that were rewritten (cut off by a crash, or damaged)."""
    backups: list[str] = field(default_factory=list)
    """Originals kept because the rewritten file lacks some of their bytes (``<file>.orig``)."""
    problems: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """What could not be carried over: byte ranges, chunks, and messages per topic where known."""
    message_count: int = 0


def _lost_messages(contents: mcap_io.FileContents) -> str:
    """Messages per topic the summary counted and the repaired file lacks ('' without a summary)."""
    with contents.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        summary = mcap_io.read_summary(mm, len(mm))
    if summary is None or not summary.channel_counts:
        return ""
    lost = {}
    for cid, n in summary.channel_counts.items():
        missing = n - contents.counts.get(cid, 0)
        if missing > 0:
            channel = contents.channels.get(cid)
            lost[channel.topic if channel else f"channel {cid}"] = missing
    return ", ".join(f"{topic} {n}" for topic, n in lost.items()) or "none"


def _free_name(path: Path) -> Path:
    out, n = path, 1
    while out.exists():
        out, n = path.with_name(f"{path.name}.{n}"), n + 1
    return out


def rewrite_file(contents: mcap_io.FileContents) -> Path | None:
    """Replace ``contents.path`` by a closed file of what it holds intact; returns the backup, if kept."""
    path = contents.path
    tmp = path.with_name(path.name + ".reindex")
    tmp.unlink(missing_ok=True)
    writer = mcap_io.McapFileWriter(tmp, library=contents.library or LIBRARY, fsync=True)
    try:
        for schema in contents.schemas.values():
            writer.add_schema(schema)
        for channel in contents.channels.values():
            writer.add_channel(channel)
        for name, entries in contents.metadata:
            writer.add_metadata(name, entries)
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for info in contents.chunks:
                chunk = mcap_io.read_chunk(mm, info.offset, len(mm))
                writer.copy_chunk(chunk, chunk.records())
            for start, end in contents.loose:
                cid, seq, log_time, pub = struct.unpack_from("<HIQQ", mm, start + 9)
                writer.add_message(cid, seq, log_time, pub, mm[start + 31 : end])
        writer.close()
        check = mcap_io.scan(tmp, strict=True)
        if not check.complete or check.counts != contents.counts:
            raise StorageError(f"{tmp.name}: the rewritten file does not read back as expected; {path.name} "
                               "left untouched")
    except BaseException:
        writer.abort()
        tmp.unlink(missing_ok=True)
        raise
    backup = None
    if contents.dropped:
        backup = _free_name(path.with_name(path.name + ".orig"))
        os.link(path, backup)  # the original bytes keep a name before the new file takes its place
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return backup


def _topics(scans: list[mcap_io.FileContents]) -> list[TopicStats]:
    topics: dict[str, TopicStats] = {}
    for contents in scans:
        for channel in contents.channels.values():
            if channel.topic not in topics:
                schema = contents.schemas.get(channel.schema_id)
                try:
                    qos = yaml.safe_load(channel.metadata.get("offered_qos_profiles", "")) or []
                except yaml.YAMLError:
                    qos = []
                topics[channel.topic] = TopicStats(
                    channel.topic,
                    schema.name if schema else "",
                    qos if isinstance(qos, list) else [],
                    channel.metadata.get("topic_type_hash", ""),
                )
    for topic, n in topic_counts(scans).items():
        topics[topic].message_count = n
    return list(topics.values())


def _repair(contents: mcap_io.FileContents, report: RepairReport) -> None:
    name = contents.path.name
    if contents.dropped:
        report.lost += [f"{name}: bytes {start}..{end} ({end - start} bytes): {why}"
                        for start, end, why in contents.dropped]
        messages = _lost_messages(contents)
        if messages:
            report.lost.append(f"{name}: messages lost by topic (the summary's counts): {messages}")
    backup = rewrite_file(contents)
    report.closed_files.append(name)
    if backup is not None:
        report.backups.append(backup.name)


def reindex(bag: Path) -> RepairReport:
    """Repair the files of ``bag`` that need it and rewrite its metadata.yaml; returns what was done."""
    if not bag.is_dir():
        raise BagNotFoundError(f"{bag}: not a directory")
    report = RepairReport(bag)
    scans = []
    for path in bag_files(bag, None):
        try:
            contents = mcap_io.scan(path, strict=False)
        except BagError as exc:
            report.problems.append(f"{path.name}: left out: {exc}")
            continue
        report.problems += contents.problems
        if not contents.complete or contents.problems:
            _repair(contents, report)
        scans.append(contents)
    custom = next((dict(m) for c in scans for name, m in c.metadata if name == "asap_episode"), {})
    files = [FileStats(c.path.name, c.start_time, c.end_time, c.message_count) for c in scans]
    write_metadata(bag, metadata_document(files, _topics(scans), custom))
    report.message_count = sum(f.message_count for f in files)
    _update_sidecar(bag, report, topic_counts(scans), [f.path for f in files])
    return report


def _update_sidecar(bag: Path, report: RepairReport, topics: dict[str, int], files: list[str]) -> None:
    """episode.json: counts of what the bag now holds; ``recovered`` if the recorder died mid-episode."""
    sidecar = bag / "episode.json"
    try:
        meta = json.loads(sidecar.read_text())
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        report.problems.append(f"episode.json unreadable, not updated: {exc}")
        return
    if not isinstance(meta, dict):
        report.problems.append("episode.json is not a JSON object, not updated")
        return
    if meta.get("status") == "recording":
        meta.update(status="recovered", stop_reason="recorder died; recovered by asap-bag reindex")
    if report.closed_files or meta.get("topics") != topics:
        meta.update(message_count=sum(topics.values()), topics=topics, files=files)
        if report.closed_files:
            meta["reindex"] = {"rewritten": report.closed_files, "originals_kept": report.backups,
                               "lost": report.lost, "problems": report.problems}
        write_json(sidecar, meta)
