"""Recover a bag after a crash: close every cut-off .mcap file and rebuild ``metadata.yaml``.

A file the recorder did not close ends after its last complete chunk (plus, perhaps, a partial
record). ``reindex`` truncates the partial record, appends the summary and footer the writer
would have written (schemas, channels, statistics, chunk and metadata indexes), then rewrites
``metadata.yaml`` from what the files contain, and marks ``episode.json`` as recovered. Chunks
that fail their CRC are left out of the index and reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from asap_logger import mcap_io
from asap_logger.bag import FileStats, TopicStats, bag_files, metadata_document, write_metadata
from asap_logger.errors import BagError, BagNotFoundError
from asap_logger.recorder import write_json


@dataclass
class RepairReport:
    """What ``reindex`` did to a bag."""

    bag: Path
    closed_files: list[str] = field(default_factory=list)
    """Files that had no summary and were closed."""
    problems: list[str] = field(default_factory=list)
    message_count: int = 0


def close_file(contents: mcap_io.FileContents) -> None:
    """Truncate a cut-off file after its last complete record and append summary + footer."""
    span = (contents.start_time, contents.end_time)
    tail = mcap_io.summary_bytes(
        contents.valid_end,
        contents.schemas,
        contents.channels,
        contents.chunks,
        contents.counts,
        span,
        contents.metadata_index,
    )
    with contents.path.open("r+b") as fh:
        fh.truncate(contents.valid_end)
        fh.seek(contents.valid_end)
        fh.write(tail)


def _topics(scans: list[mcap_io.FileContents]) -> list[TopicStats]:
    topics: dict[str, TopicStats] = {}
    for contents in scans:
        for cid, channel in contents.channels.items():
            schema = contents.schemas.get(channel.schema_id)
            stats = topics.get(channel.topic)
            if stats is None:
                qos = yaml.safe_load(channel.metadata.get("offered_qos_profiles", "")) or []
                stats = topics[channel.topic] = TopicStats(
                    channel.topic,
                    schema.name if schema else "",
                    qos,
                    channel.metadata.get("topic_type_hash", ""),
                )
            stats.message_count += contents.counts.get(cid, 0)
    return list(topics.values())


def reindex(bag: Path) -> RepairReport:
    """Close cut-off files of ``bag`` and rewrite its metadata.yaml; returns what was done."""
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
        if not contents.complete:
            close_file(contents)
            report.closed_files.append(path.name)
        scans.append(contents)
    custom = next((dict(m) for c in scans for name, m in c.metadata if name == "asap_episode"), {})
    files = [FileStats(c.path.name, c.start_time, c.end_time, c.message_count) for c in scans]
    write_metadata(bag, metadata_document(files, _topics(scans), custom))
    report.message_count = sum(f.message_count for f in files)
    _mark_recovered(bag, report)
    return report


def _mark_recovered(bag: Path, report: RepairReport) -> None:
    sidecar = bag / "episode.json"
    if not sidecar.exists():
        return
    meta = json.loads(sidecar.read_text())
    if meta.get("status") == "recording":
        meta.update(
            status="recovered",
            stop_reason="recorder died; recovered by asap-bag reindex",
            message_count=report.message_count,
            recovery_problems=report.problems,
        )
        write_json(sidecar, meta)
